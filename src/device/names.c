/*
 * Device names and specs with the grammar, matching and merging rules of TensorFlow's DeviceNameUtils,
 * so that device strings written for TensorFlow mean the same thing here. Where weft differs on
 * purpose (type case, "*", number range, printing an id without a type) the comment says why.
 */
#include "device/names.h"

#include <limits.h>
#include <stdio.h>

static const char k_grammar[] =
    "a device spec is [/job:NAME][/replica:N][/task:N][/device:TYPE[:N]] with the parts in any "
    "order and '*' for any value (/job:*, /device:GPU:*), the legacy /cpu:N, /CPU:N, /gpu:N, /GPU:N, "
    "a local name TYPE:N, or \"\", \"/\" or \"*\" for any device; NAME and TYPE start with a letter "
    "and hold letters, digits and '_', N is a number from 0 to 2147483647";

static const char k_local_cpu[] = WF__LOCAL_TASK "/device:CPU:0";

/* Where parsing stopped and why; becomes the status message. */
typedef struct names_err {
    const char *at; /* position in the text */
    char why[96];
} names_err;

static bool fail(names_err *e, const char *at, const char *fmt, ...) WF__PRINTF(3, 4);
static bool fail(names_err *e, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    e->at = at;
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    return false;
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_word(char c) { return is_alpha(c) || (c >= '0' && c <= '9') || c == '_'; }

static bool eat(const char **p, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(*p, lit, n) != 0) return false;
    *p += n;
    return true;
}

static bool same_ci(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'a' && *a <= 'z' ? (char)(*a - 32) : *a;
        if (x != *b) return false;
    }
    return *a == *b;
}

/* TF compares types byte for byte and keeps "/device:gpu:0" lower case, so it never matches the GPU
 * devices it registers as "GPU"; weft folds the case of its own types so both spellings mean the same
 * device. Other types keep their spelling, as in TF. Returns the canonical spelling or `t`. */
static const char *canon_type(const char *t)
{
    static const char *const known[] = {"CPU", "GPU", "OPENCL"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (same_ci(t, known[i])) return known[i];
    return t;
}

/* A job or type name: a letter, then letters, digits and '_' up to a terminator in `stops` or the end.
 * Like TF, any other character before the terminator makes the whole spec malformed. */
static bool take_word(const char **p, const char *stops, char *dst, size_t cap, const char *what,
                      names_err *e)
{
    const char *s = *p, *q = s;
    if (!is_alpha(*s)) return fail(e, s, "%s must start with a letter", what);
    while (*q && !strchr(stops, *q)) {
        if (!is_word(*q)) return fail(e, q, "%s may hold only letters, digits and '_'", what);
        q++;
    }
    if ((size_t)(q - s) >= cap)
        return fail(e, s, "%s is too long (weft allows %d characters)", what, (int)cap - 1);
    memcpy(dst, s, (size_t)(q - s));
    dst[q - s] = '\0';
    *p = q;
    return true;
}

/* Decimal digits after the text from `part` to *p, which the message quotes. TF reads them into a
 * uint64 and then truncates to int, so "/task:4294967296" would be task 0; weft refuses what does not
 * fit instead. */
static bool take_number(const char **p, int *out, const char *part, bool star_ok, names_err *e)
{
    const char *s = *p;
    int n = (int)(s - part);
    long long v = 0;
    if (*s < '0' || *s > '9')
        return fail(e, s, "expected a number%s after '%.*s'", star_ok ? " or '*'" : "", n, part);
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (*s - '0');
        if (v > INT_MAX) return fail(e, *p, "the number after '%.*s' is too large", n, part);
    }
    *out = (int)v;
    *p = s;
    return true;
}

/* '*' (the part is "any") or a number. */
static bool take_index(const char **p, int *has, int *out, const char *part, names_err *e)
{
    *has = !eat(p, "*");
    return !*has || take_number(p, out, part, true, e);
}

static bool parse_full(const char *s, wf_device_spec *d, names_err *e)
{
    if (strcmp(s, "/") == 0) return true;
    while (*s) {
        const char *part = s;
        if (eat(&s, "/job:")) {
            d->has_job = !eat(&s, "*");
            if (d->has_job && !take_word(&s, "/", d->job, sizeof d->job, "a job name", e)) return false;
        } else if (eat(&s, "/replica:")) {
            if (!take_index(&s, &d->has_replica, &d->replica, part, e)) return false;
        } else if (eat(&s, "/task:")) {
            if (!take_index(&s, &d->has_task, &d->task, part, e)) return false;
        } else if (eat(&s, "/device:")) {
            d->has_type = !eat(&s, "*");
            if (d->has_type && !take_word(&s, "/:", d->type, sizeof d->type, "a device type", e))
                return false;
            d->has_id = 0; /* "/device:GPU" alone means any GPU, even after "/device:GPU:1" */
            if (eat(&s, ":") && !take_index(&s, &d->has_id, &d->id, part, e)) return false;
        } else if (eat(&s, "/cpu:") || eat(&s, "/CPU:") || eat(&s, "/gpu:") || eat(&s, "/GPU:")) {
            d->has_type = 1;
            strcpy(d->type, (part[1] | 0x20) == 'c' ? "CPU" : "GPU");
            if (!take_index(&s, &d->has_id, &d->id, part, e)) return false;
        } else {
            return fail(e, s, *s == '/' ? "unknown part" : "expected '/' before the next part");
        }
    }
    return true;
}

/* TYPE:N, with a number (TF's ParseLocalName has no wildcard here). */
static bool parse_local(const char *s, wf_device_spec *d, names_err *e)
{
    const char *part = s;
    if (!take_word(&s, "/:", d->type, sizeof d->type, "a device type", e)) return false;
    if (!eat(&s, ":")) return fail(e, s, "expected ':' and a number after the device type");
    if (!take_number(&s, &d->id, part, false, e)) return false;
    if (*s) return fail(e, s, "unexpected text after the local name TYPE:N");
    d->has_type = d->has_id = 1;
    return true;
}

/* TF tries the local form and the full form in turn; they cannot both apply, because a full name starts
 * with '/' and a local one with a letter. "*" for any device is weft's: TF rejects it, but it is the
 * spelling users reach for and it cannot mean anything else. */
static wf_status *parse(const char *text, const char *role, wf_device_spec *out)
{
    wf_device_spec d;
    names_err e = {NULL, ""};
    memset(&d, 0, sizeof d);
    if (!text) text = "";
    bool ok = strcmp(text, "*") == 0 || (is_alpha(*text) ? parse_local(text, &d, &e)
                                                         : parse_full(text, &d, &e));
    if (!ok)
        return wf__status(WF_INVALID_ARGUMENT, "invalid %s '%.200s': %s at offset %d; %s", role, text,
                          e.why, (int)(e.at - text), k_grammar);
    const char *canon = canon_type(d.type);
    if (d.has_type && canon != d.type) strcpy(d.type, canon);
    *out = d;
    return NULL;
}

WF_API wf_status *wf_device_spec_parse(const char *text, wf_device_spec *out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_device_spec_parse: out is NULL");
    return parse(text, "device spec", out);
}

WF_API size_t wf_device_spec_format(const wf_device_spec *spec, char *buf, size_t cap)
{
    char tmp[WF_DEVICE_SPEC_MAX + 64];
    size_t n = 0;
    tmp[0] = '\0';
    /* %.*s: a hand-filled struct may lack its NUL; every piece is bounded so tmp cannot overflow. */
    if (spec && spec->has_job)
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "/job:%.*s", WF_DEVICE_JOB_MAX - 1, spec->job);
    if (spec && spec->has_replica)
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "/replica:%d", spec->replica);
    if (spec && spec->has_task) n += (size_t)snprintf(tmp + n, sizeof tmp - n, "/task:%d", spec->task);
    /* TF prints nothing for an id without a type ("/device:*:1"), so the text no longer says what the
     * spec means; weft prints "/device:*:1", which parses back to the same spec. */
    if (spec && (spec->has_type || spec->has_id)) {
        char type[WF_DEVICE_TYPE_MAX];
        snprintf(type, sizeof type, "%.*s", WF_DEVICE_TYPE_MAX - 1, spec->type);
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "/device:%s:",
                              spec->has_type ? canon_type(type) : "*");
        n += (size_t)(spec->has_id ? snprintf(tmp + n, sizeof tmp - n, "%d", spec->id)
                                   : snprintf(tmp + n, sizeof tmp - n, "*"));
    }
    if (cap) snprintf(buf, cap, "%s", tmp);
    return n;
}

static bool type_eq(const char *a, const char *b) { return strcmp(canon_type(a), canon_type(b)) == 0; }

WF_API int wf_device_spec_matches(const wf_device_spec *spec, const wf_device_spec *device)
{
    if (spec->has_job && (!device->has_job || strcmp(spec->job, device->job) != 0)) return 0;
    if (spec->has_replica && (!device->has_replica || spec->replica != device->replica)) return 0;
    if (spec->has_task && (!device->has_task || spec->task != device->task)) return 0;
    if (spec->has_type && (!device->has_type || !type_eq(spec->type, device->type))) return 0;
    if (spec->has_id && (!device->has_id || spec->id != device->id)) return 0;
    return 1;
}

WF_API int wf_device_spec_is_complete(const wf_device_spec *s)
{
    return s->has_job && s->has_replica && s->has_task && s->has_type && s->has_id;
}

static wf_status *conflict(const char *what, const wf_device_spec *a, const wf_device_spec *b)
{
    char x[WF_DEVICE_SPEC_MAX], y[WF_DEVICE_SPEC_MAX];
    wf_device_spec_format(a, x, sizeof x);
    wf_device_spec_format(b, y, sizeof y);
    return wf__status(WF_INVALID_ARGUMENT, "cannot merge devices with incompatible %s: '%s' and '%s'",
                      what, x, y);
}

/* TF's MergeDevNames. TF reports the target as merged so far; weft quotes the two specs as given,
 * which is what the user wrote. Under soft placement TF stops at a type conflict without looking
 * at the ids, so an id conflict there is moot. */
WF_API wf_status *wf_device_spec_merge(wf_device_spec *target, const wf_device_spec *other,
                                       int allow_soft_placement)
{
    wf_device_spec t = *target;
    if (other->has_job) {
        if (t.has_job && strcmp(t.job, other->job) != 0) return conflict("jobs", target, other);
        t.has_job = 1;
        memcpy(t.job, other->job, sizeof t.job);
    }
    if (other->has_replica) {
        if (t.has_replica && t.replica != other->replica) return conflict("replicas", target, other);
        t.has_replica = 1;
        t.replica = other->replica;
    }
    if (other->has_task) {
        if (t.has_task && t.task != other->task) return conflict("tasks", target, other);
        t.has_task = 1;
        t.task = other->task;
    }
    if (other->has_type) {
        if (t.has_type && !type_eq(t.type, other->type)) {
            if (!allow_soft_placement) return conflict("types", target, other);
            t.has_type = t.has_id = 0;
            *target = t;
            return NULL;
        }
        t.has_type = 1;
        memcpy(t.type, other->type, sizeof t.type);
    }
    if (other->has_id) {
        if (t.has_id && t.id != other->id) {
            if (!allow_soft_placement) return conflict("ids", target, other);
            t.has_id = 0;
        } else {
            t.has_id = 1;
            t.id = other->id;
        }
    }
    *target = t;
    return NULL;
}

WF_API wf_status *wf_device_spec_canonicalize(const char *name, const char *basename,
                                              wf_device_spec *out)
{
    wf_device_spec base, d;
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_device_spec_canonicalize: out is NULL");
    if (!basename) basename = k_local_cpu;
    WF__TRY(parse(basename, "device basename", &base));
    if (!wf_device_spec_is_complete(&base))
        return wf__status(WF_INVALID_ARGUMENT,
                          "device basename '%.200s' should be fully specified, like '%s'", basename,
                          k_local_cpu);
    WF__TRY(parse(name, "device name", &d));
    if (!d.has_job) memcpy(d.job, base.job, sizeof d.job);
    if (!d.has_replica) d.replica = base.replica;
    if (!d.has_task) d.task = base.task;
    if (!d.has_type) memcpy(d.type, base.type, sizeof d.type);
    if (!d.has_id) d.id = base.id;
    d.has_job = d.has_replica = d.has_task = d.has_type = d.has_id = 1;
    *out = d;
    return NULL;
}

wf_status *wf__device_spec_local(const char *type, int id, wf_device_spec *out)
{
    char text[WF_DEVICE_SPEC_MAX];
    if (!type || id < 0 || strlen(type) >= WF_DEVICE_TYPE_MAX)
        return wf__status(WF_INVALID_ARGUMENT, "invalid local device '%.40s:%d'",
                          type ? type : "(null)", id);
    snprintf(text, sizeof text, "%s:%d", type, id);
    return wf_device_spec_canonicalize(text, NULL, out);
}

bool wf__device_same_address_space(const wf_device_spec *a, const wf_device_spec *b)
{
    return a->has_job && b->has_job && strcmp(a->job, b->job) == 0 && a->has_replica &&
           b->has_replica && a->replica == b->replica && a->has_task && b->has_task &&
           a->task == b->task;
}

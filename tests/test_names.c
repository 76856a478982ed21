/* Device names and specs (src/device/names.c). The expected values are TensorFlow's: the cases come from
 * tensorflow/core/util/device_name_utils_test.cc and from reading device_name_utils.cc, plus the places
 * where weft differs on purpose (type case, "*", numbers past INT_MAX, "/device:*:N"), each marked. */
#include <limits.h>

#include "check.h"
#include "device/names.h"

static char *fmt(const wf_device_spec *s, char *buf)
{
    wf_device_spec_format(s, buf, WF_DEVICE_SPEC_MAX);
    return buf;
}

/* ---- parse -> canonical print --------------------------------------------------------------- */

static const struct { const char *in, *out; } k_print[] = {
    {"", ""},
    {"/", ""},
    {"*", ""},                                                  /* weft: TF rejects "*" */
    {"/job:foo/replica:1/task:2/gpu:3", "/job:foo/replica:1/task:2/device:GPU:3"},
    {"/job:foo_bar/replica:1/task:2/gpu:3", "/job:foo_bar/replica:1/task:2/device:GPU:3"},
    {"/job:foo_bar/replica:1/task:2/device:GPU:3", "/job:foo_bar/replica:1/task:2/device:GPU:3"},
    {"/job:*/replica:4/gpu:*", "/replica:4/device:GPU:*"},
    {"/job:*/replica:4/device:GPU:*", "/replica:4/device:GPU:*"},
    {"/job:*/device:GPU/replica:4", "/replica:4/device:GPU:*"},
    {"/job:*/replica:4/device:myspecialdevice:13", "/replica:4/device:myspecialdevice:13"},
    {"/job:*/replica:4/gpu:5", "/replica:4/device:GPU:5"},
    {"/gpu:*/job:*/replica:4", "/replica:4/device:GPU:*"},
    {"/job:foo/cpu:1/task:2/replica:1", "/job:foo/replica:1/task:2/device:CPU:1"},
    {"/device:CPU:0/task:0/replica:0/job:localhost", "/job:localhost/replica:0/task:0/device:CPU:0"},
    {"/cpu:0", "/device:CPU:0"},
    {"/CPU:0", "/device:CPU:0"},
    {"/gpu:1", "/device:GPU:1"},
    {"/GPU:7", "/device:GPU:7"},
    {"/cpu:*", "/device:CPU:*"},
    {"GPU:0", "/device:GPU:0"},
    {"cpu:0", "/device:CPU:0"},
    {"CPU:10", "/device:CPU:10"},
    {"MySpecialDevice:13", "/device:MySpecialDevice:13"},
    {"/device:gpu:3", "/device:GPU:3"},                         /* weft: TF keeps "gpu" */
    {"/device:Cpu:0", "/device:CPU:0"},                         /* weft */
    {"/device:opencl:1", "/device:OPENCL:1"},                   /* weft */
    {"OpenCL:2", "/device:OPENCL:2"},                           /* weft */
    {"/device:someDevice:3", "/device:someDevice:3"},
    {"/device:XLA_CPU:0", "/device:XLA_CPU:0"},
    {"/device:GPU", "/device:GPU:*"},
    {"/device:*", ""},
    {"/device:*:1", "/device:*:1"},                             /* weft: TF prints "" */
    {"/job:*/replica:*/task:*/device:*:*", ""},
    {"/job:a/job:b", "/job:b"},                                 /* a repeated part overrides */
    {"/job:a/job:*", ""},
    {"/replica:1/replica:2/task:3/task:*", "/replica:2"},
    {"/device:GPU:1/device:CPU", "/device:CPU:*"},
    {"/device:GPU:1/cpu:2", "/device:CPU:2"},
    {"/gpu:1/device:XLA_GPU", "/device:XLA_GPU:*"},
    {"/replica:007/task:00", "/replica:7/task:0"},
    {"/task:2147483647", "/task:2147483647"},
    {"/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:0"},
};

static void test_print(void)
{
    char buf[WF_DEVICE_SPEC_MAX];
    for (size_t i = 0; i < sizeof k_print / sizeof *k_print; i++) {
        wf_device_spec s;
        wf_status *st = wf_device_spec_parse(k_print[i].in, &s);
        if (st) {
            CHECK_FAIL_("parse '%s': %s", k_print[i].in, wf_status_message(st));
            wf_status_free(st);
            continue;
        }
        if (strcmp(fmt(&s, buf), k_print[i].out) != 0)
            CHECK_FAIL_("'%s' printed as '%s', expected '%s'", k_print[i].in, buf, k_print[i].out);
        /* The canonical text means the same spec. */
        wf_device_spec t;
        CHECK_OK(wf_device_spec_parse(buf, &t));
        CHECK(wf_device_spec_matches(&s, &t) && wf_device_spec_matches(&t, &s));
    }
}

/* Every subset of parts round-trips, in the style of TF's RoundTripPartialName. */
static void test_partial_round_trip(void)
{
    static const char *const dev[][2] = {
        {"/cpu:3", "/device:CPU:3"}, {"/gpu:3", "/device:GPU:3"}, {"/device:CPU:3", "/device:CPU:3"},
        {"/device:someDevice:3", "/device:someDevice:3"}};
    for (int mask = 0; mask < 16; mask++)
        for (int d = 0; d < 4; d++) {
            char in[128] = "", want[128] = "", got[WF_DEVICE_SPEC_MAX];
            if (mask & 1) strcat(in, "/job:foo"), strcat(want, "/job:foo");
            if (mask & 2) strcat(in, "/replica:3"), strcat(want, "/replica:3");
            if (mask & 4) strcat(in, "/task:2"), strcat(want, "/task:2");
            if (mask & 8) strcat(in, dev[d][0]), strcat(want, dev[d][1]);
            wf_device_spec s;
            CHECK_OK(wf_device_spec_parse(in, &s));
            if (strcmp(fmt(&s, got), want) != 0) CHECK_FAIL_("'%s' -> '%s', want '%s'", in, got, want);
        }
}

static void test_fields(void)
{
    wf_device_spec p;
    CHECK_OK(wf_device_spec_parse("/job:foo/replica:1/task:2/gpu:3", &p));
    CHECK(p.has_job && p.has_replica && p.has_task && p.has_type && p.has_id);
    CHECK(strcmp(p.job, "foo") == 0 && strcmp(p.type, "GPU") == 0);
    CHECK_INT(p.replica, 1);
    CHECK_INT(p.task, 2);
    CHECK_INT(p.id, 3);
    CHECK(wf_device_spec_is_complete(&p));
    CHECK_OK(wf_device_spec_parse("/job:*/replica:4/gpu:*", &p));
    CHECK(!p.has_job && p.has_replica && !p.has_task && p.has_type && !p.has_id);
    CHECK(!wf_device_spec_is_complete(&p));
    CHECK_OK(wf_device_spec_parse("/device:*:1", &p));
    CHECK(!p.has_type && p.has_id && p.id == 1);
    CHECK_OK(wf_device_spec_parse(NULL, &p));     /* NULL is "no constraint" */
    CHECK(!p.has_job && !p.has_replica && !p.has_task && !p.has_type && !p.has_id);
    wf_device_spec zero;
    memset(&zero, 0, sizeof zero);
    CHECK(memcmp(&zero, &p, sizeof p) == 0);
}

/* ---- malformed specs ------------------------------------------------------------------------ */

static const struct { const char *in, *why; } k_bad[] = {
    {"foobar", "expected ':' and a number after the device type at offset 6"},
    {"/job:123/replica:1/task:2/gpu:3", "a job name must start with a letter at offset 5"},
    {"/job:123/replica:1/task:2/gpu:", "a job name must start with a letter"},
    {"/job:foo/replica:1/task:2/gpu:", "expected a number or '*' after '/gpu:' at offset 30"},
    {"/job:123/replica:1/task:2/device:gpu:", "a job name must start with a letter"},
    {"/job:foo/replica:1/task:2/device:gpu:", "expected a number or '*' after '/device:gpu:' at offset 37"},
    {"/job:foo/replica:-1/task:2/gpu:3", "expected a number or '*' after '/replica:' at offset 17"},
    {"/job:foo/replica:1/task:-2/gpu:3", "expected a number or '*' after '/task:' at offset 24"},
    {"/job:foo/replica:1/task:2/bar:3", "unknown part at offset 25"},
    {"/job:foo/replica:1/task:2/gpu:3/extra", "unknown part at offset 31"},
    {"gpu:3/job:foo", "unexpected text after the local name TYPE:N at offset 5"},
    {"cpu:abc", "expected a number after 'cpu:' at offset 4"},
    {"abc:", "expected a number after 'abc:' at offset 4"},
    {"abc", "expected ':' and a number after the device type"},
    {"myspecialdevice", "expected ':' and a number after the device type"},
    {"GPU:*", "expected a number after 'GPU:' at offset 4"},     /* TF: no wildcard in a local name */
    {"/job:", "a job name must start with a letter at offset 5"},
    {"/job:foo:bar", "a job name may hold only letters, digits and '_' at offset 8"},
    {"/job:foo/", "unknown part at offset 8"},
    {"/job:**", "expected '/' before the next part at offset 6"},
    {"//", "unknown part at offset 0"},
    {"job:foo", "expected a number after 'job:' at offset 4"},
    {" /cpu:0", "expected '/' before the next part at offset 0"},
    {"/Cpu:0", "unknown part at offset 0"},                  /* TF's legacy form is cpu or CPU only */
    {"/opencl:0", "unknown part at offset 0"},
    {"/device:GPU:1:2", "expected '/' before the next part at offset 13"},
    {"/device:GP-U:0", "a device type may hold only letters, digits and '_' at offset 10"},
    {"/task:2x", "expected '/' before the next part at offset 7"},
    {"/task:2147483648", "the number after '/task:' is too large at offset 6"},  /* weft: TF wraps */
    {"/replica:99999999999999999999999", "too large"},
    {"/job:a123456789a123456789a123456789a123456789a123456789a123456789x1234", "a job name is too long"},
    {"/device:T123456789a123456789a123456789a123456789:0", "a device type is too long"},
};

static void test_malformed(void)
{
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        wf_device_spec s;
        memset(&s, 0x5a, sizeof s);
        wf_status *st = wf_device_spec_parse(k_bad[i].in, &s);
        if (!st) {
            CHECK_FAIL_("'%s' parsed, expected an error", k_bad[i].in);
            continue;
        }
        char quoted[300];
        snprintf(quoted, sizeof quoted, "invalid device spec '%s': ", k_bad[i].in);
        CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(wf_status_message(st), quoted);
        CHECK_STR_CONTAINS(wf_status_message(st), k_bad[i].why);
        CHECK_STR_CONTAINS(wf_status_message(st),
                           "a device spec is [/job:NAME][/replica:N][/task:N][/device:TYPE[:N]]");
        CHECK_STR_CONTAINS(wf_status_message(st), "a local name TYPE:N");
        wf_status_free(st);
        CHECK_INT(s.has_job, 0x5a5a5a5a); /* out untouched on failure */
    }
    CHECK_ERR(wf_device_spec_parse("/cpu:0", NULL), WF_INVALID_ARGUMENT, "out is NULL");
}

/* ---- match (TF's IsSpecification and IsCompleteSpecification tables) ------------------------ */

static const struct { const char *spec, *dev; int want; } k_match[] = {
    {"/job:*", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:*", "/job:work/replica:1/gpu:3", 1},
    {"/job:*", "/job:work/replica:1", 1},
    {"/job:*", "/replica:1", 1},
    {"/job:*", "/job:work", 1},
    {"/job:*/replica:*", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:*/task:*", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:*/replica:*/gpu:*", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:work/replica:1/gpu:*", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:work/replica:1/gpu:3", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:work/replica:1/task:2", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/job:work/replica:*/task:2", "/job:work/replica:1/task:2/gpu:3", 1},
    {"/task:*", "/job:*/replica:1/task:2/gpu:3", 1},
    {"/task:2", "/job:*/replica:1/task:2/gpu:3", 1},
    {"/cpu:*", "/job:*/replica:1/task:2/cpu:1", 1},
    {"/cpu:0", "/cpu:0", 1},
    {"/gpu:*", "/job:worker/replica:1/task:2/gpu:3", 1},
    {"", "/job:worker/replica:1/task:2/gpu:3", 1},
    {"*", "/job:localhost/replica:0/task:0/device:CPU:0", 1},
    {"GPU:0", "/job:localhost/replica:0/task:0/device:GPU:0", 1},
    {"/device:gpu:0", "/job:localhost/replica:0/task:0/device:GPU:0", 1}, /* weft: case folded */
    {"/device:GPU:*", "/job:localhost/replica:0/task:0/device:GPU:5", 1},
    {"/device:*:1", "/job:localhost/replica:0/task:0/device:GPU:1", 1},
    {"/device:*:1", "/job:localhost/replica:0/task:0/device:GPU:2", 0},
    {"/job:worker/replica:1/task:2/gpu:3", "/gpu:*", 0},
    {"/cpu:*", "/job:*/replica:1/task:2", 0},
    {"/cpu:*", "/job:*/replica:1/task:2/gpu:1", 0},
    {"/cpu:*", "/job:worker/replica:1/task:2/gpu:3", 0},
    {"/gpu:2", "/job:worker/replica:1/task:2/gpu:1", 0},
    {"/job:work/replica:*/task:0", "/job:work/replica:1/task:2/gpu:3", 0},
    {"/job:work/replica:0/task:2", "/job:work/replica:*/task:2/gpu:3", 0},
    {"/device:myspecialdevice:0", "/device:MySpecialDevice:0", 0},      /* other types: exact case */
    {"/job:localhost", "/job:LocalHost/replica:0/task:0/device:CPU:0", 0},
};

static void test_match(void)
{
    for (size_t i = 0; i < sizeof k_match / sizeof *k_match; i++) {
        wf_device_spec a, b;
        CHECK_OK(wf_device_spec_parse(k_match[i].spec, &a));
        CHECK_OK(wf_device_spec_parse(k_match[i].dev, &b));
        if (wf_device_spec_matches(&a, &b) != k_match[i].want)
            CHECK_FAIL_("match('%s', '%s') should be %d", k_match[i].spec, k_match[i].dev, k_match[i].want);
    }
    /* A hand-filled struct with a lower-case known type still matches. */
    wf_device_spec h, d;
    memset(&h, 0, sizeof h);
    h.has_type = 1;
    strcpy(h.type, "gpu");
    CHECK_OK(wf_device_spec_parse("/job:localhost/replica:0/task:0/device:GPU:0", &d));
    CHECK(wf_device_spec_matches(&h, &d));
    wf_device_spec a, b;
    CHECK_OK(wf_device_spec_parse("/job:foo/replica:1/task:2/cpu:3", &a));
    CHECK_OK(wf_device_spec_parse("/job:foo/replica:1/task:2/gpu:4", &b));
    CHECK(wf__device_same_address_space(&a, &b));
    CHECK_OK(wf_device_spec_parse("/job:foo/replica:1/task:3/gpu:4", &b));
    CHECK(!wf__device_same_address_space(&a, &b));
    CHECK_OK(wf_device_spec_parse("/job:foo/replica:1/gpu:4", &b));
    CHECK(!wf__device_same_address_space(&a, &b));
}

/* ---- merge (TF's MergeDevNames tables) ------------------------------------------------------ */

/* want NULL: a conflict whose message contains `err`. Merges both ways round. */
static const struct { const char *a, *b, *want, *err; int soft; } k_merge[] = {
    {"", "", "", NULL, 0},
    {"/job:foo/replica:1/task:2/cpu:1", "/job:foo/replica:1/task:2/cpu:1",
     "/job:foo/replica:1/task:2/device:CPU:1", NULL, 0},
    {"", "/job:foo", "/job:foo", NULL, 0},
    {"", "/replica:2", "/replica:2", NULL, 0},
    {"", "/task:7", "/task:7", NULL, 0},
    {"", "/gpu:1", "/device:GPU:1", NULL, 0},
    {"/job:foo", "/task:7", "/job:foo/task:7", NULL, 0},
    {"/job:foo", "/gpu:1", "/job:foo/device:GPU:1", NULL, 0},
    {"/job:foo/replica:0", "/replica:0/task:1", "/job:foo/replica:0/task:1", NULL, 0},
    {"", "/gpu:*", "/device:GPU:*", NULL, 0},
    {"/gpu:*", "/gpu:*", "/device:GPU:*", NULL, 0},
    {"/gpu:1", "/gpu:*", "/device:GPU:1", NULL, 0},
    {"/device:gpu:1", "GPU:1", "/device:GPU:1", NULL, 0},
    {"/job:foo", "/job:bar", NULL, "incompatible jobs: '/job:foo' and '/job:bar'", 0},
    {"/replica:0", "/replica:1", NULL, "incompatible replicas: '/replica:0' and '/replica:1'", 0},
    {"/task:0", "/task:1", NULL, "incompatible tasks: '/task:0' and '/task:1'", 0},
    {"/gpu:*", "/cpu:*", NULL, "incompatible types: '/device:GPU:*' and '/device:CPU:*'", 0},
    {"/gpu:0", "/gpu:1", NULL, "incompatible ids: '/device:GPU:0' and '/device:GPU:1'", 0},
    {"/job:foo", "/job:bar", NULL, "incompatible jobs", 1},  /* soft placement does not help here */
    {"/task:0/gpu:0", "/task:1/gpu:0", NULL, "incompatible tasks", 1},
    {"/gpu:*", "/cpu:1", "", NULL, 1},
    {"/cpu:*", "/gpu:1", "", NULL, 1},
    {"/gpu:1", "/gpu:2", "/device:GPU:*", NULL, 1},
    {"/job:w/gpu:0", "/task:3/cpu:0", "/job:w/task:3", NULL, 1},
    {"/job:w/gpu:0", "/replica:2/gpu:1", "/job:w/replica:2/device:GPU:*", NULL, 1},
    {"/device:*:1", "/gpu:2", NULL, "incompatible ids", 0},
    {"/device:*:1", "/gpu:2", "/device:GPU:*", NULL, 1},
};

static void test_merge(void)
{
    char got[WF_DEVICE_SPEC_MAX];
    for (size_t i = 0; i < sizeof k_merge / sizeof *k_merge; i++)
        for (int flip = 0; flip < 2; flip++) {
            const char *x = flip ? k_merge[i].b : k_merge[i].a, *y = flip ? k_merge[i].a : k_merge[i].b;
            wf_device_spec t, o, before;
            CHECK_OK(wf_device_spec_parse(x, &t));
            CHECK_OK(wf_device_spec_parse(y, &o));
            before = t;
            wf_status *st = wf_device_spec_merge(&t, &o, k_merge[i].soft);
            if (k_merge[i].want) {
                if (st) CHECK_FAIL_("merge('%s', '%s'): %s", x, y, wf_status_message(st));
                else if (strcmp(fmt(&t, got), k_merge[i].want) != 0)
                    CHECK_FAIL_("merge('%s', '%s', soft=%d) = '%s', want '%s'", x, y, k_merge[i].soft,
                                got, k_merge[i].want);
            } else if (!st) {
                CHECK_FAIL_("merge('%s', '%s') succeeded, want '%s'", x, y, k_merge[i].err);
            } else {
                CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
                /* The quoted order follows the call, so check the fixed text on the forward call only. */
                if (!flip) CHECK_STR_CONTAINS(wf_status_message(st), k_merge[i].err);
                CHECK(memcmp(&t, &before, sizeof t) == 0); /* target unchanged */
            }
            wf_status_free(st);
        }
}

/* ---- canonicalize (TF's CanonicalizeDeviceName) --------------------------------------------- */

static void test_canonicalize(void)
{
    static const struct { const char *name, *base, *want; } ok[] = {
        {"", NULL, "/job:localhost/replica:0/task:0/device:CPU:0"},
        {"GPU:1", NULL, "/job:localhost/replica:0/task:0/device:GPU:1"},
        {"/gpu:*", NULL, "/job:localhost/replica:0/task:0/device:GPU:0"},
        {"/job:worker/task:3", "/job:ps/replica:1/task:0/device:CPU:2",
         "/job:worker/replica:1/task:3/device:CPU:2"},
        {"cpu:4", "/job:foo/replica:2/task:3/gpu:1", "/job:foo/replica:2/task:3/device:CPU:4"},
    };
    char got[WF_DEVICE_SPEC_MAX];
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        wf_device_spec s;
        CHECK_OK(wf_device_spec_canonicalize(ok[i].name, ok[i].base, &s));
        CHECK(wf_device_spec_is_complete(&s));
        if (strcmp(fmt(&s, got), ok[i].want) != 0)
            CHECK_FAIL_("canonicalize('%s') = '%s', want '%s'", ok[i].name, got, ok[i].want);
    }
    wf_device_spec s;
    CHECK_ERR(wf_device_spec_canonicalize("GPU:0", "/job:foo/task:0", &s), WF_INVALID_ARGUMENT,
              "device basename '/job:foo/task:0' should be fully specified");
    CHECK_ERR(wf_device_spec_canonicalize("GPU:0", "/job:foo/bar", &s), WF_INVALID_ARGUMENT,
              "invalid device basename '/job:foo/bar'");
    CHECK_ERR(wf_device_spec_canonicalize("/gpu:", NULL, &s), WF_INVALID_ARGUMENT,
              "invalid device name '/gpu:'");
    CHECK_OK(wf__device_spec_local("gpu", 2, &s));
    CHECK(strcmp(fmt(&s, got), WF__LOCAL_TASK "/device:GPU:2") == 0);
    CHECK_ERR(wf__device_spec_local("G-PU", 0, &s), WF_INVALID_ARGUMENT, "invalid device name");
    CHECK_ERR(wf__device_spec_local("GPU", -1, &s), WF_INVALID_ARGUMENT, "invalid local device");
}

/* ---- format bounds ---------------------------------------------------------------------------- */

static void test_format(void)
{
    wf_device_spec s;
    CHECK_OK(wf_device_spec_parse("/job:localhost/replica:0/task:0/device:CPU:0", &s));
    char small[10];
    CHECK_INT(wf_device_spec_format(&s, small, sizeof small), 44);
    CHECK(strcmp(small, "/job:loca") == 0);
    CHECK_INT(wf_device_spec_format(&s, NULL, 0), 44);
    /* The longest spec fits in WF_DEVICE_SPEC_MAX. */
    memset(&s, 0, sizeof s);
    s.has_job = s.has_replica = s.has_task = s.has_type = s.has_id = 1;
    memset(s.job, 'j', sizeof s.job); /* no NUL: format must stay in bounds */
    memset(s.type, 't', sizeof s.type);
    s.replica = s.task = s.id = INT_MAX;
    char big[WF_DEVICE_SPEC_MAX];
    size_t n = wf_device_spec_format(&s, big, sizeof big);
    CHECK(n < sizeof big);
    CHECK_INT(strlen(big), n);
}

/* An out-of-memory while building the error is still an error, never a crash. */
static void test_oom(void)
{
    wf_device_spec s;
    wf__fault_inject(1);
    wf_status *st = wf_device_spec_parse("/job:", &s);
    wf__fault_inject(0);
    CHECK(st != NULL);
    wf_status_free(st);
    wf__fault_inject(1);
    CHECK_OK(wf_device_spec_parse("/job:a/gpu:0", &s)); /* parsing allocates nothing */
    wf__fault_inject(0);
}

int main(void)
{
    RUN_TEST(test_print);
    RUN_TEST(test_partial_round_trip);
    RUN_TEST(test_fields);
    RUN_TEST(test_malformed);
    RUN_TEST(test_match);
    RUN_TEST(test_merge);
    RUN_TEST(test_canonicalize);
    RUN_TEST(test_format);
    RUN_TEST(test_oom);
    return check_summary();
}

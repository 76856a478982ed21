/*
 * File sources: list_files, text lines, TFRecord and CSV, over io/records.h's readers. Each iterates
 * its files in order, one reader open at a time; errors come from the readers and name the file and
 * the line or byte offset, and the source adds its stage name. A source that fails to parse an element
 * moves past it when the reader can (a CSV row), so ignore_errors can drop it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "data/stages.h"
#include "io/records.h"

/* ---- a list of paths, shared by the file sources --------------------------------------------------- */

typedef struct paths_p {
    char **v;
    int64_t n;
    bool globbed;          /* v came from wf__list_files (its free function) */
    /* list_files */
    bool shuffle;
    uint64_t seed;
    /* csv */
    wf__csv_column *cols;  /* the selected columns in file order */
    int *sel_sorted;       /* file column of each */
    int *out_pos;          /* component each selected column becomes */
    char **defaults;       /* owned copies of string defaults */
    wf_csv_options csv;
    int n_out;
} paths_p;

static void paths_free(void *vp)
{
    paths_p *p = vp;
    if (!p) return;
    if (p->globbed) wf__list_files_free(p->v, p->n);
    else {
        for (int64_t i = 0; i < p->n; i++) wf__free(p->v[i]);
        wf__free(p->v);
    }
    for (int i = 0; p->defaults && i < p->n_out; i++) wf__free(p->defaults[i]);
    wf__free(p->defaults);
    wf__free(p->cols);
    wf__free(p->sel_sorted);
    wf__free(p->out_pos);
    wf__free(p);
}

static wf_status *copy_paths(const char *fn, const char *const *paths, int n, paths_p **out)
{
    if (!paths || n < 1) return wf__status(WF_INVALID_ARGUMENT, "%s: needs at least one path", fn);
    paths_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a file dataset", sizeof *p);
    p->v = wf__calloc((size_t)n, sizeof *p->v);
    if (!p->v) {
        wf__free(p);
        return wf__oom("a file dataset's paths", (size_t)n * sizeof *p->v);
    }
    for (int i = 0; i < n; i++) {
        if (!paths[i] || !(p->v[i] = wf__strdup(paths[i]))) {
            p->n = i;
            paths_free(p);
            return paths[i] ? wf__oom("a path", strlen(paths[i])) : wf__status(WF_INVALID_ARGUMENT, "%s: path %d is NULL", fn, i);
        }
        p->n = i + 1;
    }
    *out = p;
    return NULL;
}

static uint64_t paths_fp(const paths_p *p)
{
    uint64_t f = (uint64_t)p->n;
    for (int64_t i = 0; i < p->n; i++)
        for (const char *c = p->v[i]; *c; c++) f = wf__ds_mix(f, (uint64_t)(unsigned char)*c);
    return f;
}

/* ---- list_files ------------------------------------------------------------------------------------ */

typedef struct lf_it {
    wf__ds_it base;
    const paths_p *p;
    int64_t *order;
    int64_t i;
} lf_it;

static wf_status *lf_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    lf_it *l = (lf_it *)it;
    if (l->i >= l->p->n) {
        *end = true;
        return NULL;
    }
    const char *path = l->p->v[l->order ? l->order[l->i] : l->i];
    WF__TRY(wf__ds_string_scalar(path, strlen(path), &out->t[0]));
    out->n = 1;
    l->i++;
    wf__stage_count(it, 0, NULL);
    return NULL;
}

static wf_status *lf_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    lf_it *l = (lf_it *)it;
    int64_t left = l->p->n - l->i;
    *done = n < left ? n : left;
    l->i += *done;
    return NULL;
}

static void lf_free(wf__ds_it *it)
{
    lf_it *l = (lf_it *)it;
    wf__free(l->order);
    wf__stage_fini(it);
    wf__free(l);
}

static const wf__ds_it_vt lf_vt = {lf_next, lf_skip, lf_free};

static wf_status *lf_make(const wf_dataset *ds, wf__pipe *pp, uint64_t epoch, int depth, wf__ds_it **out)
{
    const paths_p *p = ds->params;
    lf_it *l = wf__calloc(1, sizeof *l);
    if (!l) return wf__oom("a list_files iterator", sizeof *l);
    l->p = p;
    wf_status *s = wf__stage_init(&l->base, &lf_vt, pp, "list_files", depth);
    if (!s && p->shuffle) {
        if (!(l->order = wf__malloc((size_t)p->n * sizeof *l->order))) s = wf__oom("a file order", (size_t)p->n * 8);
        else {
            /* Fisher-Yates from (seed, iteration), as shuffle's draws */
            uint64_t st = wf__ds_mix(p->seed, epoch);
            for (int64_t i = 0; i < p->n; i++) l->order[i] = i;
            for (int64_t i = p->n - 1; i > 0; i--) {
                int64_t j = (int64_t)wf__ds_draw_below(&st, (uint64_t)i + 1), t = l->order[i];
                l->order[i] = l->order[j];
                l->order[j] = t;
            }
        }
    }
    if (s) {
        l->base.vt = &lf_vt;
        lf_free(&l->base);
        return s;
    }
    *out = &l->base;
    return NULL;
}

static const wf__ds_kind lf_kind = {"list_files", lf_make, paths_free};

wf_status *wf_dataset_list_files(const char *pattern, int shuffle, uint64_t seed, wf_dataset **out)
{
    if (!pattern || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_list_files: NULL pattern or out");
    *out = NULL;
    paths_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a list_files dataset", sizeof *p);
    wf_status *s = wf__list_files(pattern, &p->v, &p->n);
    if (s) {
        wf__free(p);
        return s;
    }
    p->globbed = true;
    p->shuffle = shuffle != 0;
    p->seed = seed;
    uint64_t fp = wf__ds_mix(paths_fp(p), shuffle ? seed : 0x6c66ull);
    return wf__ds_new(&lf_kind, p, NULL, NULL, 1, p->n, fp, out);
}

/* ---- text lines and TFRecord ----------------------------------------------------------------------- */

typedef struct rec_it {
    wf__ds_it base;
    const paths_p *p;
    bool tfrecord;
    int64_t file;
    wf__textline_reader *tl;
    wf__tfrecord_reader *tr;
} rec_it;

static void rec_close(rec_it *r)
{
    if (r->tl) wf__textline_close(r->tl);
    if (r->tr) wf__tfrecord_close(r->tr);
    r->tl = NULL;
    r->tr = NULL;
}

static wf_status *rec_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    rec_it *r = (rec_it *)it;
    for (;;) {
        if (r->file >= r->p->n) {
            *end = true;
            return NULL;
        }
        const char *path = r->p->v[r->file];
        wf_status *s = NULL;
        if (!r->tl && !r->tr) {
            s = r->tfrecord ? wf__tfrecord_open(path, &r->tr) : wf__textline_open(path, 0, &r->tl);
            if (s) {
                r->file++; /* the next call goes on with the next file */
                return wf__status_wrap(s, "%s stage", r->base.st->name);
            }
        }
        int64_t t0 = wf__ds_now();
        const char *data = NULL;
        size_t len = 0;
        int e = 0;
        if (r->tfrecord) {
            const uint8_t *d = NULL;
            s = wf__tfrecord_next(r->tr, &d, &len, &e);
            data = (const char *)d;
        } else {
            s = wf__textline_next(r->tl, &data, &len, &e);
        }
        if (s) {
            /* a damaged TFRecord cannot be resynchronised: the rest of that file is skipped */
            if (r->tfrecord) {
                rec_close(r);
                r->file++;
            }
            return wf__status_wrap(s, "%s stage", r->base.st->name);
        }
        if (e) {
            rec_close(r);
            r->file++;
            continue;
        }
        WF__TRY(wf__ds_string_scalar(data, len, &out->t[0]));
        out->n = 1;
        wf__stage_count(it, wf__ds_now() - t0, out);
        return NULL;
    }
}

static void rec_free(wf__ds_it *it)
{
    rec_it *r = (rec_it *)it;
    rec_close(r);
    wf__stage_fini(it);
    wf__free(r);
}

static const wf__ds_it_vt rec_vt = {rec_next, NULL, rec_free};

static wf_status *rec_make_common(const wf_dataset *ds, wf__pipe *pp, int depth, bool tfrecord, wf__ds_it **out)
{
    rec_it *r = wf__calloc(1, sizeof *r);
    if (!r) return wf__oom("a file iterator", sizeof *r);
    r->p = ds->params;
    r->tfrecord = tfrecord;
    wf_status *s = wf__stage_init(&r->base, &rec_vt, pp, tfrecord ? "tfrecord" : "text_lines", depth);
    if (s) {
        wf__free(r);
        return s;
    }
    *out = &r->base;
    return NULL;
}

static wf_status *tl_make(const wf_dataset *ds, wf__pipe *pp, uint64_t epoch, int depth, wf__ds_it **out)
{
    (void)epoch;
    return rec_make_common(ds, pp, depth, false, out);
}

static wf_status *tfr_make(const wf_dataset *ds, wf__pipe *pp, uint64_t epoch, int depth, wf__ds_it **out)
{
    (void)epoch;
    return rec_make_common(ds, pp, depth, true, out);
}

static const wf__ds_kind tl_kind = {"text_lines", tl_make, paths_free};
static const wf__ds_kind tfr_kind = {"tfrecord", tfr_make, paths_free};

wf_status *wf_dataset_text_lines(const char *const *paths, int n_paths, wf_dataset **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_text_lines: NULL out");
    *out = NULL;
    paths_p *p;
    WF__TRY(copy_paths("wf_dataset_text_lines", paths, n_paths, &p));
    return wf__ds_new(&tl_kind, p, NULL, NULL, 1, WF_DATASET_UNKNOWN, paths_fp(p), out);
}

wf_status *wf_dataset_tfrecord(const char *const *paths, int n_paths, wf_dataset **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_tfrecord: NULL out");
    *out = NULL;
    paths_p *p;
    WF__TRY(copy_paths("wf_dataset_tfrecord", paths, n_paths, &p));
    return wf__ds_new(&tfr_kind, p, NULL, NULL, 1, WF_DATASET_UNKNOWN, paths_fp(p), out);
}

/* ---- CSV ------------------------------------------------------------------------------------------- */

typedef struct csv_it {
    wf__ds_it base;
    const paths_p *p;
    int64_t file;
    wf__csv_reader *r;
} csv_it;

static wf_status *field_tensor(const wf__csv_column *c, const wf__csv_field *f, wf_tensor **out)
{
    if (c->dtype == WF__CSV_STRING) return wf__ds_string_scalar(f->text, f->len, out);
    return wf_tensor_new(c->dtype, 0, NULL, &f->v, out);
}

static wf_status *csv_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    csv_it *c = (csv_it *)it;
    const paths_p *p = c->p;
    for (;;) {
        if (c->file >= p->n) {
            *end = true;
            return NULL;
        }
        wf_status *s = NULL;
        if (!c->r) {
            wf__csv_options o = {.delimiter = p->csv.delimiter,
                                 .header = p->csv.header,
                                 .columns = p->cols,
                                 .n_columns = p->n_out,
                                 .select = p->sel_sorted,
                                 .n_file_columns = p->csv.n_columns};
            s = wf__csv_open(p->v[c->file], &o, &c->r);
            if (s) {
                c->file++;
                return wf__status_wrap(s, "csv stage");
            }
        }
        int64_t t0 = wf__ds_now();
        const wf__csv_field *fields = NULL;
        int e = 0;
        s = wf__csv_next(c->r, &fields, &e);
        if (s) return wf__status_wrap(s, "csv stage");
        if (e) {
            wf__csv_close(c->r);
            c->r = NULL;
            c->file++;
            continue;
        }
        for (int i = 0; i < p->n_out; i++) {
            s = field_tensor(&p->cols[i], &fields[i], &out->t[p->out_pos[i]]);
            if (s) {
                out->n = p->n_out;
                wf__elem_clear(out);
                return s;
            }
        }
        out->n = p->n_out;
        wf__stage_count(it, wf__ds_now() - t0, out);
        return NULL;
    }
}

static void csv_free(wf__ds_it *it)
{
    csv_it *c = (csv_it *)it;
    if (c->r) wf__csv_close(c->r);
    wf__stage_fini(it);
    wf__free(c);
}

static const wf__ds_it_vt csv_vt = {csv_next, NULL, csv_free};

static wf_status *csv_make(const wf_dataset *ds, wf__pipe *pp, uint64_t epoch, int depth, wf__ds_it **out)
{
    (void)epoch;
    csv_it *c = wf__calloc(1, sizeof *c);
    if (!c) return wf__oom("a csv iterator", sizeof *c);
    c->p = ds->params;
    wf_status *s = wf__stage_init(&c->base, &csv_vt, pp, "csv", depth);
    if (s) {
        wf__free(c);
        return s;
    }
    *out = &c->base;
    return NULL;
}

static const wf__ds_kind csv_kind = {"csv", csv_make, paths_free};

static wf_status *parse_default(const char *text, wf_dtype dt, int col, wf__csv_column *c)
{
    char *end = NULL;
    if (dt == WF_F32 || dt == WF_F64) {
        c->default_f = strtod(text, &end);
    } else {
        c->default_i = strtoll(text, &end, 10);
    }
    if (!*text || (end && *end))
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: column %d's default '%s' is not a %s", col, text,
                          wf_dtype_name(dt));
    c->has_default = 1;
    return NULL;
}

wf_status *wf_dataset_csv(const char *const *paths, int n_paths, const wf_csv_options *o, wf_dataset **out)
{
    if (!out || !o) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: NULL options or out");
    *out = NULL;
    if (o->n_columns < 1 || !o->dtypes)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: n_columns %d and dtypes are required", o->n_columns);
    int n_out = o->select ? o->n_select : o->n_columns;
    if (n_out < 1 || n_out > WF__DS_MAXC)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: %d columns selected; an element holds 1 to %d", n_out,
                          WF__DS_MAXC);
    paths_p *p;
    WF__TRY(copy_paths("wf_dataset_csv", paths, n_paths, &p));
    p->csv = *o;
    p->csv.dtypes = NULL;
    p->csv.defaults = NULL;
    p->csv.select = NULL;
    p->n_out = n_out;
    p->cols = wf__calloc((size_t)n_out, sizeof *p->cols);
    p->sel_sorted = wf__calloc((size_t)n_out, sizeof *p->sel_sorted);
    p->out_pos = wf__calloc((size_t)n_out, sizeof *p->out_pos);
    p->defaults = wf__calloc((size_t)n_out, sizeof *p->defaults);
    wf_status *s = NULL;
    if (!p->cols || !p->sel_sorted || !p->out_pos || !p->defaults) s = wf__oom("a csv dataset", (size_t)n_out * 64);
    /* the reader takes the selected columns in file order; out_pos puts them back in the caller's */
    int taken[WF__DS_MAXC];
    for (int i = 0; !s && i < n_out; i++) {
        int col = o->select ? o->select[i] : i;
        if (col < 0 || col >= o->n_columns) {
            s = wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: selected column %d is outside 0..%d", col, o->n_columns - 1);
            break;
        }
        for (int j = 0; j < i; j++)
            if (taken[j] == col) s = wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: column %d is selected twice", col);
        taken[i] = col;
    }
    for (int k = 0; !s && k < n_out; k++) {
        /* the k-th smallest selected column */
        int best = -1;
        for (int i = 0; i < n_out; i++) {
            bool used = false;
            for (int q = 0; q < k; q++) used |= p->out_pos[q] == i;
            if (!used && (best < 0 || taken[i] < taken[best])) best = i;
        }
        int col = taken[best];
        p->sel_sorted[k] = col;
        p->out_pos[k] = best;
        wf_dtype dt = o->dtypes[col];
        wf__csv_column *c = &p->cols[k];
        if (dt == WF_STRING) c->dtype = WF__CSV_STRING;
        else if (dt == WF_F32 || dt == WF_F64 || dt == WF_I32 || dt == WF_I64) c->dtype = dt;
        else {
            s = wf__status(WF_INVALID_ARGUMENT, "wf_dataset_csv: column %d's dtype %s is not f32, f64, i32, i64 or string",
                           col, wf_dtype_name(dt));
            break;
        }
        const char *d = o->defaults ? o->defaults[col] : NULL;
        if (d && dt == WF_STRING) {
            if (!(p->defaults[k] = wf__strdup(d))) s = wf__oom("a csv default", strlen(d));
            c->default_s = p->defaults[k];
            c->has_default = 1;
        } else if (d) {
            s = parse_default(d, dt, col, c);
        }
    }
    if (s) {
        paths_free(p);
        return s;
    }
    uint64_t fp = wf__ds_mix(paths_fp(p), (uint64_t)o->n_columns * 31u + (uint64_t)n_out);
    return wf__ds_new(&csv_kind, p, NULL, NULL, n_out, WF_DATASET_UNKNOWN, fp, out);
}

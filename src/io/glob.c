/*
 * File patterns for the pipelines' file sources (TensorFlow's list_files): glob(3), then a bytewise sort,
 * because glob's own order follows the locale's collation and would differ between machines.
 */
#include <errno.h>
#include <glob.h>
#include <stdlib.h>

#include "io/records.h"

static int cmp_path(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void wf__list_files_free(char **paths, int64_t n)
{
    if (!paths) return;
    for (int64_t i = 0; i < n; i++) wf__free(paths[i]);
    wf__free(paths);
}

wf_status *wf__list_files_multi(const char *const *patterns, int n_patterns, char ***paths, int64_t *n)
{
    if (!patterns || n_patterns < 1 || !paths || !n)
        return wf__status(WF_INVALID_ARGUMENT, "wf__list_files: no patterns, or NULL paths or n");
    *paths = NULL;
    *n = 0;
    for (int i = 0; i < n_patterns; i++)
        if (!patterns[i]) return wf__status(WF_INVALID_ARGUMENT, "wf__list_files: pattern %d is NULL", i);
    glob_t g;
    memset(&g, 0, sizeof g);
    wf_status *s = NULL;
    char **out = NULL;
    size_t count = 0;
    for (int i = 0; i < n_patterns; i++) {
        errno = 0;
        int rc = glob(patterns[i], GLOB_NOSORT | (i ? GLOB_APPEND : 0), NULL, &g);
        if (rc == GLOB_NOSPACE) {
            s = wf__status(WF_OUT_OF_MEMORY, "out of memory listing the files of pattern %s", patterns[i]);
            goto done;
        }
        if (rc == GLOB_ABORTED) {
            s = wf__status(WF_IO_ERROR, "listing the files of pattern %s failed: %s", patterns[i],
                           errno ? strerror(errno) : "a folder could not be read");
            goto done;
        }
    }
    if (!g.gl_pathc) {
        wf__str all = {0};
        for (int i = 0; i < n_patterns; i++) wf__str_appendf(&all, "%s%s", i ? ", " : "", patterns[i]);
        s = all.failed ? wf__oom("a pattern list", all.len)
                       : wf__status(WF_NOT_FOUND, "No files matched pattern: %s", all.p);
        wf__str_free(&all);
        goto done;
    }
    if (!(out = wf__calloc(g.gl_pathc, sizeof *out))) {
        s = wf__oom("a file list", g.gl_pathc * sizeof *out);
        goto done;
    }
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (!(out[i] = wf__strdup(g.gl_pathv[i]))) {
            s = wf__oom("a file list", strlen(g.gl_pathv[i]) + 1);
            wf__list_files_free(out, (int64_t)i);
            out = NULL;
            goto done;
        }
    qsort(out, g.gl_pathc, sizeof *out, cmp_path);
    /* a file that several patterns match is listed once */
    for (size_t i = 0; i < g.gl_pathc; i++) {
        if (count && !strcmp(out[count - 1], out[i])) wf__free(out[i]);
        else out[count++] = out[i];
    }
    *paths = out;
    *n = (int64_t)count;
done:
    globfree(&g);
    return s;
}

wf_status *wf__list_files(const char *pattern, char ***paths, int64_t *n)
{
    return wf__list_files_multi(&pattern, 1, paths, n);
}

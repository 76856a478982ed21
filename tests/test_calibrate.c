/* Calibration of the devices' cost figures (wf_context_calibrate) and their cache file: measured figures
 * are sane and marked, the file holds a line per device and gives them back to a new context, and bad
 * caches, unwritable paths and unknown devices fail the way the API says. No timing is asserted. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char tmp[200];           /* this run's folder */
static char def_dir[256];       /* WEFT_CACHE_DIR: the default cache's folder, created by calibration */
static int have_opencl;

static void path_in(char *buf, const char *name) { snprintf(buf, PATH_MAX, "%s/%s", tmp, name); }

static int find_device(wf_context *c, const char *short_name)
{
    for (int i = 0; i < wf_context_num_devices(c); i++) {
        wf_device_info d;
        if (wf_context_device(c, i, &d)) continue;
        size_t n = strlen(d.name), k = strlen(short_name);
        if (n >= k && !strcmp(d.name + n - k, short_name) && d.name[n - k - 1] == ':') return i;
    }
    return -1;
}

static void check_sane(wf_context *c, int i)
{
    wf_device_perf p;
    wf_device_info d;
    CHECK_OK(wf_context_device_perf(c, i, &p));
    CHECK_OK(wf_context_device(c, i, &d));
    fprintf(stderr, "  %s: dense %.4g GFLOP/s, vector %.4g GFLOP/s, memory %.4g GB/s, launch %.3g us, "
                    "link %.4g GB/s, %.3g us\n",
            d.type, p.dense_gflops, p.vector_gflops, p.mem_gbps, p.launch_us, p.link_gbps, p.link_latency_us);
    CHECK_INT(p.measured, 1);
    CHECK(isfinite(p.dense_gflops) && p.dense_gflops > 0);
    CHECK(isfinite(p.vector_gflops) && p.vector_gflops > 0);
    CHECK(isfinite(p.mem_gbps) && p.mem_gbps > 0);
    CHECK(isfinite(p.launch_us) && p.launch_us > 0);
    if (strcmp(d.backend, "builtin")) { /* the CPU has no link of its own */
        CHECK(isfinite(p.link_gbps) && p.link_gbps > 0);
        CHECK(isfinite(p.link_latency_us) && p.link_latency_us > 0);
    }
}

/* Every figure equal within the %.9g the file is written with. */
static void check_same(const wf_device_perf *a, const wf_device_perf *b)
{
    double x[6] = {a->dense_gflops, a->vector_gflops, a->mem_gbps, a->launch_us, a->link_gbps, a->link_latency_us};
    double y[6] = {b->dense_gflops, b->vector_gflops, b->mem_gbps, b->launch_us, b->link_gbps, b->link_latency_us};
    for (int k = 0; k < 6; k++) CHECK_NEAR(x[k], y[k], 1e-8 * fabs(x[k]) + 1e-12);
    CHECK_INT(a->measured, b->measured);
}

/* Lines of the file that start with the device's full name and a tab. */
static int lines_of(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[8192];
    int n = 0;
    size_t k = strlen(name);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, k) && line[k] == '\t') n++;
    fclose(f);
    return n;
}

static void test_calibrate_and_reload(void)
{
    wf_context *c;
    CHECK_OK(wf_context_new(NULL, &c));
    int cpu = find_device(c, "CPU:0"), ocl = find_device(c, "OPENCL:0");
    CHECK(cpu >= 0);
    if (cpu < 0) return;
    have_opencl = ocl >= 0;
    wf_device_perf before;
    CHECK_OK(wf_context_device_perf(c, cpu, &before));
    CHECK_INT(before.measured, 0); /* the default folder does not exist yet */

    /* the default cache, in a folder calibration has to create; the second call merges into it */
    CHECK_OK(wf_context_calibrate(c, "CPU:0", NULL));
    check_sane(c, cpu);
    if (have_opencl) {
        CHECK_OK(wf_context_calibrate(c, "OPENCL:0", NULL));
        check_sane(c, ocl);
    } else {
        fprintf(stderr, "  OPENCL:0 absent (no libweft-opencl.so or no OpenCL device): CPU only\n");
    }

    char cache[PATH_MAX];
    snprintf(cache, sizeof cache, "%s/perf.txt", def_dir);
    wf_device_info d;
    CHECK_OK(wf_context_device(c, cpu, &d));
    CHECK_INT(lines_of(cache, d.name), 1);
    if (have_opencl) {
        CHECK_OK(wf_context_device(c, ocl, &d));
        CHECK_INT(lines_of(cache, d.name), 1);
    }

    /* a new context reads the default cache itself */
    wf_context *c2;
    CHECK_OK(wf_context_new(NULL, &c2));
    wf_device_perf p1, p2;
    for (int k = 0; k < 2; k++) {
        int i = k ? ocl : cpu;
        if (i < 0) continue;
        CHECK_OK(wf_context_device_perf(c, i, &p1));
        CHECK_OK(wf_context_device_perf(c2, i, &p2));
        check_same(&p1, &p2);
    }
    wf_context_free(c2);

    /* and an explicit path: the same file moved elsewhere, loaded into a context that saw no cache */
    char moved[PATH_MAX], empty[PATH_MAX];
    path_in(moved, "moved.txt");
    path_in(empty, "empty-cache-dir");
    CHECK(rename(cache, moved) == 0);
    setenv("WEFT_CACHE_DIR", empty, 1);
    CHECK_OK(wf_context_new(NULL, &c2));
    CHECK_OK(wf_context_device_perf(c2, cpu, &p2));
    CHECK_INT(p2.measured, 0);
    CHECK_OK(wf_context_load_calibration(c2, moved));
    for (int k = 0; k < 2; k++) {
        int i = k ? ocl : cpu;
        if (i < 0) continue;
        CHECK_OK(wf_context_device_perf(c, i, &p1));
        CHECK_OK(wf_context_device_perf(c2, i, &p2));
        check_same(&p1, &p2);
    }
    wf_context_free(c2);
    setenv("WEFT_CACHE_DIR", def_dir, 1);
    unlink(moved);
    wf_context_free(c);
}

static void test_bad_caches(void)
{
    wf_context *c;
    setenv("WEFT_CACHE_DIR", tmp, 1); /* no perf.txt there */
    CHECK_OK(wf_context_new(NULL, &c));
    int cpu = find_device(c, "CPU:0");
    wf_device_info d;
    CHECK_OK(wf_context_device(c, cpu, &d));
    wf_device_perf def, now;
    CHECK_OK(wf_context_device_perf(c, cpu, &def));

    char path[PATH_MAX];
    path_in(path, "garbage.txt");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "garbage\n\n\t\t\t\n# a comment\t\t\t1 2 3 4 5 6\n");
    fprintf(f, "%s\t%s\t%s\t1 2 3\n", d.name, d.description, d.backend);                 /* too few */
    fprintf(f, "%s\t%s\t%s\t1 2 3 4 5 6 7\n", d.name, d.description, d.backend);         /* too many */
    fprintf(f, "%s\t%s\t%s\tnan 2 3 4 5 6\n", d.name, d.description, d.backend);         /* not finite */
    fprintf(f, "%s\t%s\t%s\t1 -2 3 4 5 6\n", d.name, d.description, d.backend);          /* negative */
    fprintf(f, "%s\t%s\t%s\t0 2 3 4 5 6\n", d.name, d.description, d.backend);           /* zero rate */
    fprintf(f, "%s\t%s\t%s\t1 2 3 4 5 6x\n", d.name, d.description, d.backend);          /* trailing junk */
    fprintf(f, "%s\tsome other CPU\t%s\t1 2 3 4 5 6\n", d.name, d.backend);              /* other hardware */
    fprintf(f, "%s\t%s\tother\t1 2 3 4 5 6\n", d.name, d.description);                   /* other backend */
    fprintf(f, "/job:localhost/replica:0/task:0/device:GPU:9\tx\tcuda\t1 2 3 4 5 6\n");  /* absent device */
    fprintf(f, "%s\t%s\t%s\t", d.name, d.description, d.backend);                         /* over-long */
    for (int i = 0; i < 5000; i++) fputc('7', f);
    fprintf(f, " 2 3 4 5 6\n\xff\xfe\x01\t\x80\t\t\n");
    fprintf(f, "%s\t%s\t%s\t1 2 3 4 5 6", d.name, d.description, d.backend);             /* no newline, */
    fclose(f);                                                                            /* but valid */

    /* the last line alone is well formed */
    CHECK_OK(wf_context_load_calibration(c, path));
    CHECK_OK(wf_context_device_perf(c, cpu, &now));
    CHECK_INT(now.measured, 1);
    CHECK_NEAR(now.dense_gflops, 1, 0);
    CHECK_NEAR(now.link_latency_us, 6, 0);

    /* without it, nothing changes */
    wf_context *c2;
    f = fopen(path, "r+");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fclose(f);
        CHECK(truncate(path, n - 2) == 0); /* "... 5 6" becomes "... 5": five numbers */
    }
    CHECK_OK(wf_context_new(NULL, &c2));
    CHECK_OK(wf_context_load_calibration(c2, path));
    CHECK_OK(wf_context_device_perf(c2, cpu, &now));
    check_same(&def, &now);

    /* a context reading such a file as its default cache starts fine with the defaults */
    char dflt[PATH_MAX];
    path_in(dflt, "perf.txt");
    CHECK(rename(path, dflt) == 0);
    wf_context *c3;
    CHECK_OK(wf_context_new(NULL, &c3));
    CHECK_OK(wf_context_device_perf(c3, cpu, &now));
    check_same(&def, &now);
    wf_context_free(c3);
    unlink(dflt);

    /* a missing file is no error, and changes nothing */
    path_in(path, "no-such-folder/perf.txt");
    CHECK_OK(wf_context_load_calibration(c2, path));
    CHECK_OK(wf_context_device_perf(c2, cpu, &now));
    check_same(&def, &now);
    wf_context_free(c2);
    wf_context_free(c);
    setenv("WEFT_CACHE_DIR", def_dir, 1);
}

static void test_errors(void)
{
    wf_context *c;
    CHECK_OK(wf_context_new(NULL, &c));
    int cpu = find_device(c, "CPU:0");
    wf_device_perf before, after;
    CHECK_OK(wf_context_device_perf(c, cpu, &before));

    /* a folder that is a file cannot hold the cache, whoever runs the test */
    char file[PATH_MAX], bad[PATH_MAX];
    path_in(file, "a-file");
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    snprintf(bad, sizeof bad, "%s/a-file/perf.txt", tmp);
    CHECK_ERR(wf_context_calibrate(c, "CPU:0", bad), WF_IO_ERROR, bad);
    CHECK_OK(wf_context_device_perf(c, cpu, &after));
    check_same(&before, &after); /* refused before measuring */
    unlink(file);

    char path[PATH_MAX];
    path_in(path, "never.txt");
    CHECK_ERR(wf_context_calibrate(c, "/device:GPU:7", path), WF_NOT_FOUND, "/device:GPU:7");
    CHECK_ERR(wf_context_calibrate(c, "/job:elsewhere", path), WF_NOT_FOUND, "/job:elsewhere");
    CHECK_ERR(wf_context_calibrate(c, "/nonsense:0", path), WF_INVALID_ARGUMENT, "/nonsense:0");
    CHECK(access(path, F_OK) != 0); /* nothing written */
    CHECK_ERR(wf_context_calibrate(NULL, NULL, path), WF_INVALID_ARGUMENT, "NULL");
    CHECK_ERR(wf_context_load_calibration(NULL, path), WF_INVALID_ARGUMENT, "NULL");
    wf_context_free(c);
}

/* The plugin built beside the test's folder (build/libweft-opencl.so), when there is one. */
static void find_plugins(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash) return;
        *slash = 0;
    }
    char so[PATH_MAX + 32];
    snprintf(so, sizeof so, "%s/libweft-opencl.so", exe);
    if (access(so, R_OK) == 0) setenv("WEFT_PLUGIN_PATH", exe, 1);
}

int main(void)
{
    find_plugins();
    snprintf(tmp, sizeof tmp, "/tmp/weft-calibrate-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    /* the default cache goes here and never to the user's ~/.cache */
    snprintf(def_dir, sizeof def_dir, "%s/cache/weft", tmp);
    setenv("WEFT_CACHE_DIR", def_dir, 1);
    RUN_TEST(test_calibrate_and_reload);
    RUN_TEST(test_bad_caches);
    RUN_TEST(test_errors);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return check_summary();
}

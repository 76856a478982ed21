/*
 * Option values of every `weft` command, parsed strictly: a number is the whole argument or an error
 * that names the option, the value and what is allowed, on one stderr line; paths the command will
 * write are checked before any work starts, so a typo costs nothing.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "weft %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return CLI_USAGE;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i, const char *meta)
{
    /* "--input --random-inputs" is a forgotten value, not a file named "--random-inputs"; a single
     * dash stays a value so that "--iterations -1" reaches the number check */
    if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) {
        cli_usage_error(cmd, "%s needs a value (%s)", argv[*i], meta);
        return NULL;
    }
    return argv[++*i];
}

/* Only what strtoll/strtoull read without their leniencies: no leading space, no '+', no "0x". */
static int plain_integer(const char *v, int allow_minus)
{
    const char *p = v;
    if (allow_minus && *p == '-') p++;
    if (!*p) return 0;
    for (; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return 1;
}

int cli_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out)
{
    errno = 0;
    long long x = plain_integer(v, 1) ? strtoll(v, NULL, 10) : 0;
    int is_int = plain_integer(v, 1) && errno != ERANGE;
    if (is_int && x >= lo && x <= hi) {
        *out = x;
        return 0;
    }
    /* a count from 1 reads best as "a positive integer" until the value is too large; every other
     * failure names the range */
    int too_large = plain_integer(v, 0) && (errno == ERANGE || x > hi);
    if (!too_large && lo == 1) return cli_usage_error(cmd, "%s wants a positive integer, got '%s'", opt, v);
    return cli_usage_error(cmd, "%s wants an integer from %lld to %lld, got '%s'", opt, lo, hi, v);
}

int cli_u64(const char *cmd, const char *opt, const char *v, uint64_t *out)
{
    errno = 0;
    unsigned long long x = plain_integer(v, 0) ? strtoull(v, NULL, 10) : 0;
    if (!plain_integer(v, 0) || errno == ERANGE)
        return cli_usage_error(cmd, "%s wants an integer from 0 to %llu, got '%s'", opt, (unsigned long long)UINT64_MAX,
                               v);
    *out = x;
    return 0;
}

/* A decimal number as strtod reads it, but only digits, one '.', and an exponent: no "inf", "nan",
 * hex floats or leading space. Returns where the number ends, or NULL. */
static const char *plain_decimal(const char *v, double *x)
{
    const char *p = v;
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.') p++;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (!digits) return NULL;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-') q++;
        if (!isdigit((unsigned char)*q)) return NULL;
        while (isdigit((unsigned char)*q)) q++;
        p = q;
    }
    char *end;
    errno = 0;
    *x = strtod(v, &end);
    if (end != p || errno == ERANGE || !isfinite(*x)) return NULL;
    return p;
}

int cli_positive(const char *cmd, const char *opt, const char *v, double *out)
{
    double x;
    const char *end = plain_decimal(v, &x);
    if (!end || *end || !(x > 0)) return cli_usage_error(cmd, "%s wants a positive finite number, got '%s'", opt, v);
    *out = x;
    return 0;
}

int cli_size(const char *v, uint64_t *out)
{
    double x;
    const char *end = plain_decimal(v, &x);
    if (!end) return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    /* 2^64 itself does not fit; the next double below it does. A fraction of a byte would truncate to
     * 0, which means no limit at all. */
    if (*end || x * mul >= 18446744073709551616.0 || (x > 0 && x * mul < 1)) return -1;
    *out = (uint64_t)(x * mul);
    return 0;
}

int cli_mkdirs(const char *cmd, const char *opt, const char *path)
{
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) {
        fprintf(stderr, "weft %s: out of memory\n", cmd);
        return 1;
    }
    memcpy(p, path, n + 1);
    int rc = 0;
    /* each prefix that ends before a '/', then the whole path */
    for (size_t k = 1; k <= n && !rc; k++) {
        if (k < n && p[k] != '/') continue;
        if (k < n && p[k - 1] == '/') continue; /* "a//b" */
        char c = p[k];
        p[k] = 0;
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "weft %s: %s %s: cannot create '%s': %s\n", cmd, opt, path, p, strerror(errno));
            rc = 1;
        } else if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "weft %s: %s %s: '%s' is not a directory\n", cmd, opt, path, p);
            rc = 1;
        }
        p[k] = c;
    }
    if (!rc && access(path, W_OK | X_OK) != 0) {
        fprintf(stderr, "weft %s: %s %s: cannot write into it: %s\n", cmd, opt, path, strerror(errno));
        rc = 1;
    }
    free(p);
    return rc;
}

int cli_check_writable(const char *cmd, const char *opt, const char *path, const char *hint)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "weft %s: %s %s: is a directory, a file name is expected%s\n", cmd, opt, path, hint);
        return 1;
    }
    /* Creating the file is the only check that holds for root, read-only mounts and ACLs alike; a file
     * made here is removed again, so a failed run leaves nothing behind, and an existing one is opened
     * without truncation, so it keeps its contents until the command writes it. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    int made = fd >= 0;
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY);
    if (fd < 0) {
        fprintf(stderr, "weft %s: %s %s: cannot write: %s%s\n", cmd, opt, path, strerror(errno), hint);
        return 1;
    }
    close(fd);
    if (made) unlink(path);
    return 0;
}

void cli_print_memory(wf_context *ctx)
{
    for (int d = 0; d < wf_context_num_devices(ctx); d++) {
        wf_memory_stats ms;
        wf_device_info di;
        wf_status *e = wf_context_memory_stats(ctx, d, &ms);
        if (!e) e = wf_context_device(ctx, d, &di);
        if (e || !ms.peak) {
            wf_status_free(e); /* a device without statistics prints nothing */
            continue;
        }
        const char *shortname = strstr(di.name, "device:");
        printf("memory: %s activations %.2f MiB (the plans' arenas), peak in use %.2f MiB\n",
               shortname ? shortname + 7 : di.name, (double)ms.arena_bytes / (1024.0 * 1024),
               (double)ms.peak / (1024.0 * 1024));
    }
}

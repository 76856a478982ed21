/* Helpers that several test programs share: paths and files in the program's scratch folder (g_dir,
 * which the program creates), and whether a library is mapped into the process. */
#ifndef WF_TEST_UTIL_H
#define WF_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static char g_dir[128]; /* this run's scratch folder */

/* g_dir/name, in one of four rotating buffers (so a call can take two or three such paths). */
static inline const char *path_in(const char *name)
{
    static char buf[4][320];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static inline const char *write_file(const char *name, const void *bytes, size_t n)
{
    const char *p = path_in(name);
    FILE *f = fopen(p, "wb");
    if (n) fwrite(bytes, 1, n, f);
    fclose(f);
    return p;
}

static inline size_t read_all(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Whether a library whose path contains `name` is mapped into this process. */
static inline bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

/* The line of `node` in a placement text (`name: (Op): device  # reason`), in a static buffer; "" when
 * the text has none. */
static inline const char *line_of(const char *text, const char *node)
{
    static char buf[1024];
    size_t n = strlen(node);
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len > n && !strncmp(l, node, n) && l[n] == ':') {
            snprintf(buf, sizeof buf, "%.*s", (int)len, l);
            return buf;
        }
        l = e ? e + 1 : NULL;
    }
    return "";
}

#endif

/*
 * What the file-reader fuzz targets share: each input is written to a file in a private RAM-backed
 * folder (the library's API takes paths), and every failure must be a status with a one-line message
 * naming that file (an out-of-memory status from deep inside may name only the allocation).
 */
#ifndef WF_FUZZ_FILE_H
#define WF_FUZZ_FILE_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/weft.h"

static char g_fuzz_dir[1024], g_fuzz_path[1100];

static void fuzz_cleanup(void)
{
    unlink(g_fuzz_path);
    rmdir(g_fuzz_dir);
}

/* Makes the folder and the path of the input file, named `name`. */
static void fuzz_setup(const char *name)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_fuzz_dir, sizeof g_fuzz_dir, "%s/weft-fuzz-XXXXXX", base);
    if (!mkdtemp(g_fuzz_dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(g_fuzz_path, sizeof g_fuzz_path, "%s/%s", g_fuzz_dir, name);
    atexit(fuzz_cleanup);
}

static void fuzz_write(const uint8_t *data, size_t size)
{
    int fd = open(g_fuzz_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);
}

/* `one_line`: the reader quotes nothing from the file verbatim, so a newline is a bug. "(null)" is
 * glibc printing a NULL string (undefined behaviour elsewhere), unless the input itself holds it. */
static void fuzz_check_status(wf_status *s, const char *needle, bool one_line, const uint8_t *data, size_t size)
{
    if (!s) return;
    const char *msg = wf_status_message(s);
    bool names = msg && (strstr(msg, needle) || wf_status_code(s) == WF_OUT_OF_MEMORY);
    bool null_str = msg && strstr(msg, "(null)") && !memmem(data, size, "(null)", 6);
    if (!msg || !*msg || !names || null_str || (one_line && strchr(msg, '\n'))) {
        fprintf(stderr, "bad error message: '%s'\n", msg ? msg : "(null)");
        abort();
    }
    wf_status_free(s);
}

#endif

/*
 * libFuzzer target for the ONNX importer: each input is written as model.onnx into a private folder
 * (beside a data.bin that external-data initializers may name) and given to wf_onnx_load,
 * wf_onnx_inspect and wf_onnx_read_tensor. Any outcome but a clean status or a clean load is a bug.
 * Built and run by scripts/fuzz.sh.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weft/weft.h"

static char g_model[4096];

/* The library's API takes paths, so the input goes through a file; a RAM-backed folder keeps each
 * iteration at a few microseconds of I/O. */
static void setup(void)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/weft-fuzz-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    char data[1100];
    snprintf(data, sizeof data, "%s/data.bin", dir);
    FILE *f = fopen(data, "wb");
    if (!f) abort();
    for (int i = 0; i < 4096; i++) fputc(i * 7 & 0xff, f);
    fclose(f);
    snprintf(g_model, sizeof g_model, "%s/model.onnx", dir);
}

static void cleanup(void)
{
    char path[4200];
    unlink(g_model);
    snprintf(path, sizeof path, "%s", g_model);
    char *slash = strrchr(path, '/');
    strcpy(slash, "/data.bin");
    unlink(path);
    *slash = 0;
    rmdir(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setup();
    atexit(cleanup);
    return 0;
}

/* A status must carry a non-empty message that names the file (an out-of-memory status from deep
 * inside may name only the allocation). Messages quote names from the file verbatim, so a newline in
 * a fuzzed name may legitimately appear in them. "(null)" is glibc printing a NULL string (undefined
 * behaviour elsewhere), unless the input itself holds that text. */
static void check_status(wf_status *s, const uint8_t *data, size_t size)
{
    if (!s) return;
    const char *msg = wf_status_message(s);
    bool names_file = msg && (strstr(msg, "model.onnx") || wf_status_code(s) == WF_OUT_OF_MEMORY);
    bool null_str = msg && strstr(msg, "(null)") && !memmem(data, size, "(null)", 6);
    if (!msg || !*msg || !names_file || null_str) {
        fprintf(stderr, "bad error message: '%s'\n", msg ? msg : "(null)");
        abort();
    }
    wf_status_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = open(g_model, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);

    wf_graph *g;
    if (wf_graph_new(&g)) abort();
    /* a node already in the graph: the import must leave it alone on failure and avoid its name */
    int64_t d = 3;
    wf_output x;
    wf_status *s = wf_placeholder(g, "x", WF_F32, 1, &d, &x);
    if (s) abort();
    wf_onnx_model *m = NULL;
    s = wf_onnx_load(g_model, g, &m);
    if (s) {
        if (wf_graph_num_nodes(g) != 1) {
            fprintf(stderr, "failed import left %d nodes in the graph: %s\n", wf_graph_num_nodes(g),
                    wf_status_message(s));
            abort();
        }
        check_status(s, data, size);
    } else {
        for (int i = 0; i < wf_onnx_num_inputs(m); i++)
            if (!wf_onnx_input(m, i)->name || !wf_onnx_input(m, i)->output.node) abort();
        for (int i = 0; i < wf_onnx_num_outputs(m); i++)
            if (!wf_onnx_output(m, i)->name || !wf_onnx_output(m, i)->output.node) abort();
        wf_onnx_model_free(m);
    }
    wf_graph_free(g);

    char *text = NULL;
    s = wf_onnx_inspect(g_model, &text);
    if (s) check_status(s, data, size);
    else wf_free(text);

    wf_tensor *t = NULL;
    s = wf_onnx_read_tensor(g_model, &t);
    if (s) check_status(s, data, size);
    else wf_tensor_free(t);
    return 0;
}

/*
 * libFuzzer target for the image decoders: each input is fed as a string to DecodeJpeg and DecodePng
 * (as stored, and converted to 3 and 4 channels) in one session that lives across inputs. A failure
 * must be a one-line status naming the node; an image that decodes must have the shape the op promises.
 * The CPU's memory limit (64 MiB) turns a hostile header's size into OUT_OF_MEMORY before anything that
 * size is allocated. Built and run by scripts/fuzz.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft.h"

static wf_context *g_ctx;
static wf_graph *g_graph;
static wf_session *g_sess;
static wf_output g_in, g_out[5];
static const char *const g_names[5] = {"jpeg_any", "jpeg_rgb", "jpeg_gray", "png_any", "png_rgba"};
static const int g_channels[5] = {0, 3, 1, 0, 4};

static void must(wf_status *s)
{
    if (s) {
        fprintf(stderr, "setup: %s\n", wf_status_message(s));
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    must(wf_context_new(NULL, &g_ctx));
    must(wf_context_set_memory_limit(g_ctx, "CPU:0", (uint64_t)64 << 20));
    must(wf_graph_new(&g_graph));
    must(wf_placeholder(g_graph, "bytes", WF_STRING, 0, NULL, &g_in));
    for (int i = 0; i < 5; i++)
        must((i < 3 ? wf_decode_jpeg : wf_decode_png)(g_graph, g_names[i], g_in, g_channels[i], &g_out[i]));
    must(wf_session_new(g_ctx, g_graph, NULL, &g_sess));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wf_tensor *in = NULL;
    const char *p = (const char *)data;
    must(wf_tensor_new_strings(0, NULL, &p, &size, &in));
    wf_feed fd = {g_in, in};
    for (int i = 0; i < 5; i++) {
        wf_tensor *y = NULL;
        wf_status *s = wf_session_run(g_sess, &fd, 1, &g_out[i], 1, &y, NULL);
        if (s) {
            const char *msg = wf_status_message(s);
            wf_code c = wf_status_code(s);
            if (y || !msg || !strstr(msg, g_names[i]) || strchr(msg, '\n') ||
                (c != WF_INVALID_ARGUMENT && c != WF_OUT_OF_MEMORY)) {
                fprintf(stderr, "bad error (%s): '%s'\n", wf_code_name(c), msg ? msg : "(null)");
                abort();
            }
            wf_status_free(s);
            continue;
        }
        const int64_t *d = wf_tensor_dims(y);
        if (wf_tensor_dtype(y) != WF_U8 || wf_tensor_rank(y) != 3 || (g_channels[i] && d[2] != g_channels[i]) ||
            d[2] < 1 || d[2] > 4 || (size_t)wf_tensor_bytes(y) != (size_t)(d[0] * d[1] * d[2])) {
            fprintf(stderr, "bad output of %s\n", g_names[i]);
            abort();
        }
        wf_tensor_free(y);
    }
    wf_tensor_free(in);
    return 0;
}

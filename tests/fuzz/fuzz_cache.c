/*
 * libFuzzer target for the input pipeline's cache file (src/data/cache.c): each input becomes the cache
 * file of range(0, 16).cache(path), read back by an iterator. Inputs whose first byte is even get the
 * real header (magic and the pipeline's fingerprint) put in front, so the fuzzer spends its time on the
 * element records; odd ones are the whole file, header included. Every failure must be a one-line
 * status naming the file (or running out of memory); a file that reads to the end gives tensors whose
 * sizes match their shapes.
 */
#include "fuzz_file.h"

#include "data/pipeline.h"

static wf_dataset *g_src, *g_cache;
static uint8_t *g_buf;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("input.cache");
    if (wf_dataset_range(0, 16, 1, &g_src) || wf_dataset_cache(g_src, g_fuzz_path, &g_cache)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && !(data[0] & 1)) {
        /* the header this pipeline writes: "WFCACHE1" and the input's fingerprint */
        uint64_t fp = g_src->fingerprint;
        free(g_buf);
        g_buf = malloc(size + 16);
        if (!g_buf) return 0;
        memcpy(g_buf, "WFCACHE1", 8);
        memcpy(g_buf + 8, &fp, 8);
        memcpy(g_buf + 16, data + 1, size - 1);
        fuzz_write(g_buf, size + 15);
    } else {
        fuzz_write(size ? data + 1 : data, size ? size - 1 : 0);
    }
    wf_iterator *it = NULL;
    wf_status *s = wf_dataset_iterator(g_cache, NULL, &it);
    if (s) {
        if (it) abort();
        fuzz_check_status(s, "input.cache", true, data, size);
        return 0;
    }
    for (int k = 0; k < 4096; k++) {
        wf_tensor *t[WF_DATASET_MAX_COMPONENTS];
        int n = 0;
        s = wf_iterator_next(it, t, WF_DATASET_MAX_COMPONENTS, &n);
        if (s) {
            fuzz_check_status(s, "input.cache", true, data, size);
            break;
        }
        if (!n) break;
        for (int i = 0; i < n; i++) {
            size_t want = (size_t)wf_tensor_size(t[i]) * wf_dtype_size(wf_tensor_dtype(t[i]));
            if (wf_tensor_dtype(t[i]) == WF_STRING ? wf_tensor_bytes(t[i]) < want : wf_tensor_bytes(t[i]) != want) abort();
            wf_tensor_free(t[i]);
        }
    }
    wf_iterator_free(it);
    return 0;
}

/*
 * libFuzzer target for the .npy reader: each input is a file given to wf_npy_read. A failure must be a
 * one-line status naming the file; an array that loads must write back and read back the same.
 * Built and run by scripts/fuzz.sh.
 */
#include "fuzz_file.h"

static char g_copy[1200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("input.npy");
    snprintf(g_copy, sizeof g_copy, "%s/copy.npy", g_fuzz_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(data, size);
    wf_tensor *t = NULL;
    wf_status *s = wf_npy_read(g_fuzz_path, &t);
    if (s) {
        if (t) abort(); /* nothing returned on failure */
        fuzz_check_status(s, "input.npy", true, data, size);
        return 0;
    }
    if (wf_npy_write(g_copy, t)) abort();
    wf_tensor *u = NULL;
    if (wf_npy_read(g_copy, &u)) abort();
    if (wf_tensor_dtype(u) != wf_tensor_dtype(t) || wf_tensor_rank(u) != wf_tensor_rank(t) ||
        wf_tensor_bytes(u) != wf_tensor_bytes(t) ||
        memcmp(wf_tensor_dims(u), wf_tensor_dims(t), sizeof(int64_t) * (size_t)wf_tensor_rank(t)) ||
        (wf_tensor_bytes(t) && memcmp(wf_tensor_data(u), wf_tensor_data(t), wf_tensor_bytes(t))))
        abort();
    unlink(g_copy);
    wf_tensor_free(u);
    wf_tensor_free(t);
    return 0;
}

/*
 * libFuzzer target for the safetensors reader: each input is a file given to wf_safetensors_read and
 * wf_safetensors_metadata. A failure must be a status naming the file (tensor names are quoted
 * verbatim, so a message may span lines); a file that loads must write back and read back the same.
 * Built and run by scripts/fuzz.sh.
 */
#include "fuzz_file.h"

static char g_copy[1200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("input.safetensors");
    snprintf(g_copy, sizeof g_copy, "%s/copy.safetensors", g_fuzz_dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(data, size);
    char *meta = NULL;
    wf_status *s = wf_safetensors_metadata(g_fuzz_path, &meta);
    if (s) fuzz_check_status(s, "input.safetensors", false, data, size);
    int n = -1;
    char **names = NULL;
    wf_tensor **ts = NULL;
    s = wf_safetensors_read(g_fuzz_path, &n, &names, &ts);
    if (s) {
        if (n != -1 || names || ts) abort(); /* nothing returned on failure */
        fuzz_check_status(s, "input.safetensors", false, data, size);
        wf_free(meta);
        return 0;
    }
    s = wf_safetensors_write(g_copy, n, (const char *const *)names, ts, meta);
    if (s) {
        /* a name the writer refuses (none should be) */
        fprintf(stderr, "write-back failed: %s\n", wf_status_message(s));
        abort();
    }
    int m;
    char **names2;
    wf_tensor **ts2;
    if (wf_safetensors_read(g_copy, &m, &names2, &ts2) || m != n) abort();
    for (int i = 0; i < n; i++) {
        const wf_tensor *a = ts[i], *b = ts2[i];
        if (strcmp(names[i], names2[i]) || wf_tensor_dtype(a) != wf_tensor_dtype(b) ||
            wf_tensor_rank(a) != wf_tensor_rank(b) || wf_tensor_bytes(a) != wf_tensor_bytes(b) ||
            (wf_tensor_bytes(a) && memcmp(wf_tensor_data(a), wf_tensor_data(b), wf_tensor_bytes(a))))
            abort();
    }
    unlink(g_copy);
    wf_safetensors_free(m, names2, ts2);
    wf_safetensors_free(n, names, ts);
    wf_free(meta);
    return 0;
}

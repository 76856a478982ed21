/*
 * libFuzzer target for the TFRecord reader: each input is a file read record by record, uncompressed
 * and through the gzip path. A failure must be a one-line status naming the file; a position saved
 * before a record must read the same record again; a file that reads cleanly must be what the writer
 * makes of its records, byte for byte. Built and run by scripts/fuzz.sh.
 */
#include "fuzz_file.h"
#include "io/records.h"

enum { MAX_KEEP = 64 };

static char g_copy[1200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_setup("input.tfrecord");
    snprintf(g_copy, sizeof g_copy, "%s/copy.tfrecord", g_fuzz_dir);
    return 0;
}

static void read_file(const uint8_t *data, size_t size, wf__compression comp)
{
    wf__tfrecord_options o = {.compression = comp, .max_record = 1 << 20};
    wf__tfrecord_reader *r = NULL;
    wf_status *s = wf__tfrecord_open_with(g_fuzz_path, &o, &r);
    if (s) {
        if (r) abort();
        fuzz_check_status(s, "input.tfrecord", true, data, size);
        return;
    }
    int64_t off[MAX_KEEP], idx[MAX_KEEP];
    uint32_t crc[MAX_KEEP];
    size_t len[MAX_KEEP];
    const void *recs[MAX_KEEP];
    uint8_t *copies[MAX_KEEP];
    int n = 0, end = 0;
    bool clean = false, kept_all = true;
    for (;;) {
        int64_t at = wf__tfrecord_tell(r), ix = wf__tfrecord_index(r);
        const uint8_t *d;
        size_t l;
        s = wf__tfrecord_next(r, &d, &l, &end);
        if (s) {
            if (d || l) abort();
            if (wf__tfrecord_tell(r) != at || wf__tfrecord_index(r) != ix) abort(); /* stays at the bad record */
            fuzz_check_status(s, "input.tfrecord", true, data, size);
            break;
        }
        if (end) {
            clean = true;
            break;
        }
        if (n < MAX_KEEP) {
            off[n] = at;
            idx[n] = ix;
            crc[n] = wf_crc32c(d, l, 0);
            len[n] = l;
            copies[n] = malloc(l ? l : 1);
            memcpy(copies[n], d, l);
            recs[n] = copies[n];
            n++;
        } else {
            kept_all = false;
        }
    }
    /* positions restored, last first */
    for (int i = n - 1; i >= 0; i -= 3) {
        if (wf__tfrecord_seek(r, off[i], idx[i])) abort();
        const uint8_t *d;
        size_t l;
        if (wf__tfrecord_next(r, &d, &l, &end) || end || l != len[i] || wf_crc32c(d, l, 0) != crc[i]) abort();
    }
    wf__tfrecord_close(r);
    if (clean && kept_all && comp == WF__COMPRESSION_NONE) {
        if (wf_tfrecord_write(g_copy, recs, len, n)) abort();
        FILE *f = fopen(g_copy, "rb");
        uint8_t *back = malloc(size + 1);
        size_t got = fread(back, 1, size + 1, f);
        fclose(f);
        if (got != size || memcmp(back, data, size)) abort();
        free(back);
        unlink(g_copy);
    }
    for (int i = 0; i < n; i++) free(copies[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write(data, size);
    read_file(data, size, WF__COMPRESSION_NONE);
    read_file(data, size, WF__COMPRESSION_GZIP);
    return 0;
}

/* The best-fit-with-coalescing device allocator over a fake device: no two live blocks overlap, freed
 * neighbours merge, growth is lazy, a limit gives OUT_OF_MEMORY naming the device and the request, and
 * everything returns to zero. */
#include <stdlib.h>

#include "check.h"
#include "device/bfc.h"

static long g_chunks;
static size_t g_device_left = (size_t)1 << 40;

static void *fake_alloc(void *user, size_t bytes)
{
    if (bytes > g_device_left) return NULL;
    g_device_left -= bytes;
    g_chunks++;
    return malloc(bytes);
}

static void fake_free(void *user, void *chunk)
{
    g_chunks--;
    free(chunk);
}

static const wf__bfc_backend fake = {fake_alloc, fake_free, NULL};

static void test_random_pattern(void)
{
    wf__bfc *a;
    CHECK_OK(wf__bfc_new("FAKE:0", 0, 256, fake, &a));
    enum { N = 400 };
    wf__bfc_block live[N];
    int is_live[N] = {0};
    unsigned seed = 5;
    int overlaps = 0;
    for (int step = 0; step < 4000; step++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % N);
        if (is_live[i]) {
            wf__bfc_release(a, &live[i]);
            is_live[i] = 0;
        } else {
            size_t bytes = 1 + (seed >> 4) % 200000;
            CHECK_OK(wf__bfc_alloc(a, bytes, &live[i]));
            CHECK(live[i].size >= bytes && live[i].offset % 256 == 0);
            is_live[i] = 1;
            /* the new block overlaps no other live block of its chunk */
            for (int j = 0; j < N; j++)
                if (j != i && is_live[j] && live[j].chunk == live[i].chunk &&
                    live[j].offset < live[i].offset + live[i].size && live[i].offset < live[j].offset + live[j].size)
                    overlaps++;
            memset((char *)live[i].chunk + live[i].offset, i & 0xff, bytes);
        }
    }
    CHECK_INT(overlaps, 0);
    for (int i = 0; i < N; i++)
        if (is_live[i]) wf__bfc_release(a, &live[i]);
    wf__bfc_stats st = wf__bfc_get_stats(a);
    CHECK_INT(st.in_use, 0);
    CHECK_INT(st.n_allocs, 0);
    CHECK(st.peak_in_use > 0 && st.reserved >= st.peak_in_use);
    /* after coalescing, a request as large as the biggest chunk fits without growing */
    long chunks_before = g_chunks;
    wf__bfc_block big;
    CHECK_OK(wf__bfc_alloc(a, (size_t)1 << 20, &big));
    CHECK_INT(g_chunks, chunks_before);
    wf__bfc_release(a, &big);
    wf__bfc_trim(a);
    CHECK_INT(wf__bfc_get_stats(a).reserved, 0);
    CHECK_INT(g_chunks, 0);
    wf__bfc_free(a);
}

static void test_limit_and_recovery(void)
{
    wf__bfc *a;
    CHECK_OK(wf__bfc_new("OPENCL:0", 4 << 20, 256, fake, &a));
    wf__bfc_block b1, b2, b3;
    CHECK_OK(wf__bfc_alloc(a, 3 << 20, &b1));
    CHECK_ERR(wf__bfc_alloc(a, 2 << 20, &b2), WF_OUT_OF_MEMORY, "out of memory on OPENCL:0: cannot allocate 2097152 bytes");
    CHECK_OK(wf__bfc_alloc(a, 512 << 10, &b2)); /* what is left still serves smaller requests */
    wf__bfc_release(a, &b1);
    CHECK_OK(wf__bfc_alloc(a, 3 << 20, &b3));    /* and the freed space is reused */
    wf__bfc_release(a, &b2);
    wf__bfc_release(a, &b3);
    CHECK_INT(wf__bfc_get_stats(a).in_use, 0);
    wf__bfc_free(a);
    CHECK_INT(g_chunks, 0);
}

static void test_device_refuses(void)
{
    wf__bfc *a;
    CHECK_OK(wf__bfc_new("GPU:1", 0, 256, fake, &a));
    g_device_left = 3 << 20;
    wf__bfc_block b1, b2;
    CHECK_OK(wf__bfc_alloc(a, 1 << 20, &b1));
    CHECK_ERR(wf__bfc_alloc(a, 8 << 20, &b2), WF_OUT_OF_MEMORY, "out of memory on GPU:1: cannot allocate 8388608 bytes");
    wf__bfc_release(a, &b1);
    g_device_left = (size_t)1 << 40;
    CHECK_OK(wf__bfc_alloc(a, 8 << 20, &b2));
    wf__bfc_release(a, &b2);
    wf__bfc_free(a);
    CHECK_INT(g_chunks, 0);
}

/* A device with less free memory than the next growth step still serves a block that fits. */
static void test_nearly_full_device(void)
{
    wf__bfc *a;
    CHECK_OK(wf__bfc_new("GPU:2", 0, 256, fake, &a));
    g_device_left = 64 << 10; /* less than the first 1 MiB chunk */
    wf__bfc_block b1, b2, b3;
    CHECK_OK(wf__bfc_alloc(a, 60, &b1));
    CHECK_OK(wf__bfc_alloc(a, 40 << 10, &b2));
    CHECK_ERR(wf__bfc_alloc(a, 60 << 10, &b3), WF_OUT_OF_MEMORY, "GPU:2");
    wf__bfc_release(a, &b1);
    wf__bfc_release(a, &b2);
    g_device_left = (size_t)1 << 40;
    wf__bfc_free(a);
    CHECK_INT(g_chunks, 0);
}

int main(void)
{
    RUN_TEST(test_random_pattern);
    RUN_TEST(test_limit_and_recovery);
    RUN_TEST(test_device_refuses);
    RUN_TEST(test_nearly_full_device);
    return check_summary();
}

/*
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files: slicing-by-8
 * tables, or the SSE4.2 crc32 instruction when the CPU has it (chosen at run time, so one binary serves
 * machines with and without it).
 */
#include <pthread.h>

#include "io/records.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define WF__CRC_HW 1
#endif

static uint32_t g_table[8][256];
static pthread_once_t g_table_once = PTHREAD_ONCE_INIT;

static void make_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        g_table[0][i] = c;
    }
    /* g_table[k][i]: the CRC of byte i followed by k zero bytes, so 8 bytes fold in one step */
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = g_table[k - 1][i];
            g_table[k][i] = (c >> 8) ^ g_table[0][c & 0xff];
        }
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint32_t wf__crc32c_portable(const void *data, size_t n, uint32_t crc)
{
    pthread_once(&g_table_once, make_tables);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = g_table[7][w & 0xff] ^ g_table[6][(w >> 8) & 0xff] ^ g_table[5][(w >> 16) & 0xff] ^
            g_table[4][(w >> 24) & 0xff] ^ g_table[3][(w >> 32) & 0xff] ^ g_table[2][(w >> 40) & 0xff] ^
            g_table[1][(w >> 48) & 0xff] ^ g_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#ifdef WF__CRC_HW
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const void *data, size_t n, uint32_t crc)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

bool wf__crc32c_hw_available(void)
{
#ifdef WF__CRC_HW
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

uint32_t wf_crc32c(const void *data, size_t n, uint32_t crc)
{
    /* 0 unknown, 1 tables, 2 SSE4.2: a benign race, every thread computes the same answer */
    static _Atomic int path;
    int k = atomic_load_explicit(&path, memory_order_relaxed);
    if (!k) {
        k = wf__crc32c_hw_available() ? 2 : 1;
        atomic_store_explicit(&path, k, memory_order_relaxed);
    }
#ifdef WF__CRC_HW
    if (k == 2) return crc32c_sse42(data, n, crc);
#endif
    return wf__crc32c_portable(data, n, crc);
}

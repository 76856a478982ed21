/* Minimal test harness: typed assertions that report file:line and the values, a per-test runner,
 * and the closing line "N passed, N failed, N skipped" that CI reads. A test that cannot run calls
 * CHECK_SKIP with the reason: it prints "SKIP name: why" (scripts/run-tests.sh collects those lines)
 * and is counted as skipped, never as passed. */
#ifndef WF_TEST_CHECK_H
#define WF_TEST_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "weft/weft.h"

static int check_failures_;   /* failures in the current test */
static int check_passed_, check_failed_, check_skipped_;
static int check_skip_pending_; /* the running test called CHECK_SKIP */

#define CHECK_FAIL_(...)                                                                       \
    do {                                                                                       \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                          \
        fputc('\n', stderr);                                                                   \
        check_failures_++;                                                                     \
    } while (0)

#define CHECK(cond)                                                                            \
    do { if (!(cond)) CHECK_FAIL_("CHECK(%s) failed", #cond); } while (0)
#define CHECK_INT(a, b)                                                                        \
    do { long long a_ = (long long)(a), b_ = (long long)(b);                                   \
         if (a_ != b_) CHECK_FAIL_("%s == %s: %lld vs %lld", #a, #b, a_, b_); } while (0)
#define CHECK_NEAR(a, b, tol)                                                                  \
    do { double a_ = (double)(a), b_ = (double)(b);                                            \
         if (!(fabs(a_ - b_) <= (tol))) CHECK_FAIL_("%s ~ %s: %.9g vs %.9g", #a, #b, a_, b_); } while (0)
#define CHECK_STR_CONTAINS(hay, needle)                                                        \
    do { const char *h_ = (hay), *n_ = (needle);                                               \
         if (!h_ || !strstr(h_, n_)) CHECK_FAIL_("'%s' does not contain '%s'", h_ ? h_ : "(null)", n_); } while (0)
/* The call must succeed; otherwise prints the status and fails the test. */
#define CHECK_OK(expr)                                                                         \
    do { wf_status *s_ = (expr);                                                               \
         if (s_) { CHECK_FAIL_("%s: %s: %s", #expr, wf_code_name(wf_status_code(s_)),          \
                               wf_status_message(s_)); wf_status_free(s_); } } while (0)
/* The call must fail with `code` and a message containing `text`. */
#define CHECK_ERR(expr, code, text)                                                            \
    do { wf_status *s_ = (expr);                                                               \
         if (!s_) CHECK_FAIL_("%s succeeded, expected %s", #expr, wf_code_name(code));          \
         else { if (wf_status_code(s_) != (code))                                              \
                    CHECK_FAIL_("%s: code %s, expected %s (%s)", #expr,                         \
                                wf_code_name(wf_status_code(s_)), wf_code_name(code),           \
                                wf_status_message(s_));                                        \
                CHECK_STR_CONTAINS(wf_status_message(s_), text);                               \
                wf_status_free(s_); } } while (0)

/* Skips the rest of the calling test: "SKIP name: why" on stdout, counted apart. Use it only for what
 * the machine lacks (a GPU, a package), and say which; the caller returns right after. */
#define CHECK_SKIP(name, ...)                                                                  \
    do { printf("SKIP %s: ", (name)); printf(__VA_ARGS__); putchar('\n'); fflush(stdout);      \
         check_skip_pending_ = 1; } while (0)

#define RUN_TEST(fn)                                                                           \
    do { check_failures_ = 0; check_skip_pending_ = 0; fn();                                   \
         if (check_failures_) { check_failed_++; fprintf(stderr, "FAIL %s\n", #fn); }          \
         else if (check_skip_pending_) { check_skipped_++; fprintf(stderr, "skip %s\n", #fn); } \
         else { check_passed_++; fprintf(stderr, "ok   %s\n", #fn); } } while (0)

/* Prints the closing line and returns the process exit code. */
static inline int check_summary(void)
{
    (void)check_skip_pending_;
    printf("%d passed, %d failed, %d skipped\n", check_passed_, check_failed_, check_skipped_);
    return check_failed_ ? 1 : 0;
}

#endif

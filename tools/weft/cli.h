/* Commands of the weft tool, one file each, and the option parsing they share (args.c). */
#ifndef WEFT_CLI_H
#define WEFT_CLI_H

#include <stdint.h>

#include "weft/weft.h"

/* Exit codes of every command: 0 done; 1 a file, the model or the run failed (the message names it);
 * 2 a usage error: an unknown option, a missing or malformed value, a value out of range, a missing
 * or second model path. */
#define CLI_USAGE 2

int cli_fail(wf_status *s); /* prints and frees s; returns the exit code 1 */
int cmd_demo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);

/* Prints "weft CMD: <message>" as one stderr line; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Whether --help or -h is among the arguments (it wins over every other argument). */
int cli_wants_help(int argc, char **argv);
/* The value of the option argv[*i], stepping *i over it; NULL, after "weft CMD: OPT needs a value
 * (META)", when there is none or the next argument is an option ("--..."). */
const char *cli_value(const char *cmd, int argc, char **argv, int *i, const char *meta);
/* A base-10 integer in [lo, hi] that is the whole of v: 0, or CLI_USAGE after one line naming opt,
 * what it wants and v ("--iterations wants a positive integer, got '-1'"). */
int cli_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);
/* Any unsigned 64-bit integer (digits only). */
int cli_u64(const char *cmd, const char *opt, const char *v, uint64_t *out);
/* A positive finite decimal ("1e-3", "0.01"; not "inf", "nan", "0"). */
int cli_positive(const char *cmd, const char *opt, const char *v, double *out);
/* A byte count: a non-negative decimal with an optional K, M, G or T (powers of 1024) and an optional
 * B ("256M", "1.5M", "1048576"); 0 on success, -1 (nothing printed) when v is none. */
int cli_size(const char *v, uint64_t *out);
/* mkdir -p path, then a check that files can be made in it: 0, or 1 after a line naming the component
 * that failed. */
int cli_mkdirs(const char *cmd, const char *opt, const char *path);
/* Whether path can be written, checked by creating it (removed again) or opening it without truncation:
 * 0, or 1 after a line naming the option, the path and the reason, ending with hint ("" for none). */
int cli_check_writable(const char *cmd, const char *opt, const char *path, const char *hint);
/* "memory: CPU:0 activations X MiB (the plans' arenas), peak in use Y MiB" per device that used any. The
 * arenas hold every intermediate value of a run (activations, and in training their gradients); the peak
 * adds what ran outside them (a training step's new variable and optimizer-slot values). Constants and
 * feeds are counted in neither. */
void cli_print_memory(wf_context *ctx);

#endif

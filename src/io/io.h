/*
 * Shared by the file readers (npy, safetensors, the ONNX loader): what a file claims is checked against
 * what it holds and against the machine's memory before anything of that size is allocated.
 */
#ifndef WF_IO_H
#define WF_IO_H

#include <stdbool.h>
#include <stdio.h>

#include "core/checked.h"
#include "core/core.h"

/* NULL when `bytes` could be allocated (no more than wf__host_alloc_limit: RAM plus swap, or the
 * cgroup's memory limit when that is lower); else OUT_OF_MEMORY "PATH: WHAT needs N bytes (X GiB), more than
 * this machine's memory (Y GiB)". Called before allocating what a file claims, so that a file (sparse,
 * or on a huge disk) that really holds terabytes gets a clear error rather than the OOM killer. */
wf_status *wf__io_check_memory(const char *path, const char *what, uint64_t bytes);

/* Copies s[0..n) into buf (cap bytes) for an error message: bytes outside printable ASCII become '?',
 * and long text is cut with "...". Returns buf. */
const char *wf__io_quote(const char *s, size_t n, char *buf, size_t cap);

/* Finishes a file written to `tmp` (open as f; ok: every write succeeded): flushed to the disk, closed and
 * renamed over `path`, so a crash leaves the old file or the new one, never half of one. On any failure
 * tmp is removed and the status is IO_ERROR "PATH: write failed: REASON". f is closed either way. */
wf_status *wf__io_commit(FILE *f, bool ok, const char *tmp, const char *path);

#endif

/*
 * Exporter-private whole-file writes: output goes to a temporary file in the destination's
 * directory and is renamed over the destination only once complete, so readers never see a
 * truncated profile and a failed write leaves nothing behind.
 */
#ifndef PP_EXPORTER_FILEIO_H
#define PP_EXPORTER_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* Writes what fill() prints to f; fill returns 0 or -errno. Returns 0 or -errno. */
int pp_file_write_atomic(const char *path, int (*fill)(FILE *f, void *arg), void *arg);
/* Writes len bytes of buf. Returns 0 or -errno. */
int pp_file_write_bytes(const char *path, const void *buf, size_t len);

#endif /* PP_EXPORTER_FILEIO_H */

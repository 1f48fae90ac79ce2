/*
 * The symbolization section of `pebsprof probe`: what this machine offers for naming frames
 * (debug directories, libdebuginfod and DEBUGINFOD_URLS, openat2 for opening files inside
 * containers' roots, the C++ demangler), as text and as JSON.
 */
#ifndef PP_COLLECTOR_PROBE_SYMBOLIZE_H
#define PP_COLLECTOR_PROBE_SYMBOLIZE_H

#include "sampling/probe.h"

/* The section's writers, for pp_probe_run. */
extern const struct pp_probe_extra pp_probe_symbolize;

#endif /* PP_COLLECTOR_PROBE_SYMBOLIZE_H */

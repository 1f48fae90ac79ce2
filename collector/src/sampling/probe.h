/*
 * `pebsprof probe [--json]`: what this machine can sample and why. Kernel and BPF features,
 * perf sysctls, privileges, every PMU with its precise-sampling capability and memory
 * events, and the event `auto` would pick, found by running the real ladder with an opener
 * that opens and closes. Text for humans, JSON with the same facts for tools.
 */
#ifndef PP_COLLECTOR_PROBE_H
#define PP_COLLECTOR_PROBE_H

#include <stdio.h>

#include "events.h"
#include "sysinfo.h"

/*
 * Sections another layer adds to the report (the collector's symbolization facts): text
 * writes its lines, json one "key":value member of the report's object.
 */
struct pp_probe_extra {
	void (*text)(FILE *out);
	void (*json)(FILE *out);
};

/*
 * Write the report for sys to out, with extra's sections when extra is not NULL. The auto decision
 * is taken with open_fn/open_ctx (NULL = the perf_event_open syscall) in dry-run mode, so nothing
 * stays open. Returns 0, or -EIO when writing fails. A failed auto decision is part of the report,
 * not an error.
 */
int pp_probe_report(const struct pp_sys *sys, pp_perf_open_fn open_fn, void *open_ctx, int json,
		    FILE *out, const struct pp_probe_extra *extra);

/* Write s as a JSON string literal (quotes included, control characters escaped). */
void pp_probe_json_string(FILE *out, const char *s);

/* Format an ascending CPU array as a list ("0-7,16") into buf. Returns buf. */
char *pp_probe_cpulist_str(const int *cpus, size_t nr, char *buf, size_t len);

/*
 * The subcommand: argv[0] is "probe". Options: --json, --sysfs-root DIR, --procfs-root DIR,
 * -h/--help. Returns the exit code: 0 ok, 1 runtime failure, 2 usage error.
 */
int pp_probe_run(int argc, char **argv, const struct pp_probe_extra *extra);

#endif /* PP_COLLECTOR_PROBE_H */

/*
 * The names Grafana Pyroscope accepts, and the names the agent gives what has none.
 *
 * Pyroscope's /ingest parses name= with api/model/labelset (labelset.go `Parse`, validate.go
 * `ValidateServiceName`, `ValidateLabelName`): the service name, trimmed of white space,
 * must be non-empty and made of [A-Za-z0-9_.\-/] only; label names of [A-Za-z0-9_.]. Its
 * distributor (pkg/validation/validate.go `ValidateLabels`) then checks every series label;
 * v1.21 sanitizes names the legacy way ([a-zA-Z0-9_.], no leading digit, '.' becomes '_',
 * and two names that become one with different values are a duplicate), so a name that
 * passes both is one of [A-Za-z0-9_.] not starting with a digit, unique after that folding.
 * One bad name makes the whole request fail with HTTP 400, which the agent cannot retry.
 *
 * The names come from other processes (executable names, comm, which a process sets to
 * anything), so the agent maps them here rather than trusting them:
 *   - a disallowed character becomes '_' (one per character, not per byte), white space at
 *     either end is trimmed, a process name's enclosing "[...]" goes;
 *   - '/' is kept in configured names only: no executable's base name can hold one, so the
 *     stated names below, which do, cannot be taken by a process naming itself;
 *   - a name left empty becomes "unknown_service", as in OpenTelemetry.
 */
#ifndef PEBSPROF_PYROSCOPE_H
#define PEBSPROF_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>

/* The services of samples without a process of their own, when none is configured. */
#define PP_SERVICE_KERNEL_THREADS "kernel/threads" /* kernel threads: kworker, ksoftirqd... */
#define PP_SERVICE_IDLE "kernel/idle"		   /* the idle task (pid 0) */
#define PP_SERVICE_UNKNOWN "unknown_service"

/* The stated service of a process kind (enum pp_process_kind, profile.h); NULL for a program. */
const char *pp_pyroscope_stated_service(unsigned process_kind);

/*
 * Pyroscope's bounds on a series' labels (pkg/validation/limits.go defaults
 * max-label-name-length, max-label-value-length): one label over them refuses the push.
 */
#define PP_PYROSCOPE_LABEL_NAME_MAX_LEN 1024
#define PP_PYROSCOPE_LABEL_VALUE_MAX_LEN 2048

/* Longest service name written: well within a label value's bound. */
#define PP_PYROSCOPE_NAME_MAX 256

enum pp_service_source {
	PP_SERVICE_CONFIGURED, /* from the operator or the pod (service.name): '/' allowed */
	PP_SERVICE_PROCESS,    /* an executable name or comm: '/' is not */
};

/*
 * Writes the Pyroscope service name for name into out (NUL-terminated; cut at a character
 * boundary to fit out_size, at most PP_PYROSCOPE_NAME_MAX - 1 bytes) and returns out.
 * out_size must be at least 16.
 */
const char *pp_pyroscope_service_name(const char *name, enum pp_service_source src, char *out,
				      size_t out_size);

/* Whether name is a service name Pyroscope's labelset.Parse accepts as it is. */
bool pp_pyroscope_service_name_ok(const char *name);

/*
 * Writes name as a label name every Pyroscope version accepts: [A-Za-z0-9_.] with anything
 * else as '_', '_' before a leading digit, "_" for an empty name. Returns the length written
 * (cut to out_size - 1).
 */
size_t pp_pyroscope_label_name(const char *name, char *out, size_t out_size);

/* Whether name is such a label name as it is. */
bool pp_pyroscope_label_name_ok(const char *name);

/* Whether two label names are one to Pyroscope v1.21 (equal once '.' reads as '_'). */
bool pp_pyroscope_label_names_clash(const char *a, const char *b);

#endif /* PEBSPROF_PYROSCOPE_H */

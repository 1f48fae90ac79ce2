/*
 * The agent's health and metrics endpoint: request parsing, the health rules, the
 * Prometheus text, and a poll-based HTTP/1.1 server thread answering from the last snapshot
 * the run loop handed over. See health.h for what is served and when /healthz says 503.
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include "health.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "sampling/shim_loader.h"

#define NS_PER_S 1000000000ull
#define NS_PER_MS 1000000ull
#define MAX_METHOD_LEN 16

/* ---- request parsing ---------------------------------------------------------------------- */

static int is_tchar(unsigned char c)
{
	return c && (isalnum(c) || strchr("!#$%&'*+-.^_`|~", c));
}

/* Consumes a line end (CRLF or LF) at *i. */
static int line_end(const char *buf, size_t len, size_t *i)
{
	if (*i == len)
		return -EAGAIN;
	if (buf[*i] == '\n') {
		(*i)++;
		return 0;
	}
	if (buf[*i] != '\r')
		return -EBADMSG;
	if (*i + 1 == len)
		return -EAGAIN;
	if (buf[*i + 1] != '\n')
		return -EBADMSG;
	*i += 2;
	return 0;
}

/* The path of a request target: origin form as is, absolute form from its first '/'. */
static int target_path(const char *t, size_t n, const char **path, size_t *plen)
{
	const char *q;
	size_t skip = 0;

	if (n >= 7 && !strncasecmp(t, "http://", 7))
		skip = 7;
	else if (n >= 8 && !strncasecmp(t, "https://", 8))
		skip = 8;
	if (skip) {
		const char *slash = memchr(t + skip, '/', n - skip);

		if (slash == t + skip)
			return -EBADMSG; /* no authority */
		if (!slash) {
			*path = "/";
			*plen = 1;
			return 0;
		}
		n -= (size_t)(slash - t);
		t = slash;
	}
	if (t[0] != '/')
		return -EBADMSG;
	q = memchr(t, '?', n);
	*path = t;
	*plen = q ? (size_t)(q - t) : n;
	return 0;
}

int pp_http_parse_request(const char *buf, size_t len, struct pp_http_request *out)
{
	static const char version[] = "HTTP/1.";
	size_t i = 0, m0, m1, t0, t1;
	const char *path;
	size_t plen;
	int ret;

	/* RFC 9112 2.2: empty lines before the request line are ignored. */
	while (i < len && (buf[i] == '\r' || buf[i] == '\n'))
		i++;
	m0 = i;
	while (i < len && is_tchar((unsigned char)buf[i]))
		i++;
	if (i - m0 > MAX_METHOD_LEN)
		return -EBADMSG;
	if (i == len)
		return -EAGAIN;
	if (buf[i] != ' ' || i == m0)
		return -EBADMSG;
	m1 = i;
	t0 = ++i;
	while (i < len && buf[i] > 0x20 && buf[i] < 0x7f)
		i++;
	if (i == len)
		return -EAGAIN;
	if (buf[i] != ' ' || i == t0)
		return -EBADMSG;
	t1 = i++;
	if (target_path(buf + t0, t1 - t0, &path, &plen))
		return -EBADMSG;
	for (size_t k = 0; k < sizeof(version) - 1; k++, i++) {
		if (i == len)
			return -EAGAIN;
		if (buf[i] != version[k])
			return -EBADMSG;
	}
	if (i == len)
		return -EAGAIN;
	if (buf[i] != '0' && buf[i] != '1')
		return -EBADMSG;
	out->minor = buf[i++] - '0';
	ret = line_end(buf, len, &i);
	if (ret)
		return ret;
	/* Header lines up to the blank line; a line starting with space (obs-fold) is refused. */
	for (;;) {
		size_t n0;

		if (i == len)
			return -EAGAIN;
		if (buf[i] == '\r' || buf[i] == '\n') {
			ret = line_end(buf, len, &i);
			if (ret)
				return ret;
			break;
		}
		n0 = i;
		while (i < len && is_tchar((unsigned char)buf[i]))
			i++;
		if (i == len)
			return -EAGAIN;
		if (buf[i] != ':' || i == n0)
			return -EBADMSG;
		i++;
		while (i < len && (buf[i] == ' ' || buf[i] == '\t' ||
				   ((unsigned char)buf[i] > 0x20 && buf[i] != 0x7f)))
			i++;
		ret = line_end(buf, len, &i);
		if (ret)
			return ret;
	}
	if (m1 - m0 == 3 && !memcmp(buf + m0, "GET", 3))
		out->method = PP_HTTP_GET;
	else if (m1 - m0 == 4 && !memcmp(buf + m0, "HEAD", 4))
		out->method = PP_HTTP_HEAD;
	else
		out->method = PP_HTTP_OTHER;
	out->path = path;
	out->path_len = plen;
	out->header_len = i;
	return 0;
}

/* ---- health rules ------------------------------------------------------------------------- */

static double secs(uint64_t ns)
{
	return (double)ns / NS_PER_S;
}

enum pp_health_status pp_health_check(const struct pp_health_snapshot *s,
				      const struct pp_health_limits *l, uint64_t now_ns,
				      char *reason, size_t reason_len)
{
	char dummy[8];
	uint64_t age;

	if (!reason || !reason_len) {
		reason = dummy;
		reason_len = sizeof(dummy);
	}
	if (!s->updated_ns) {
		snprintf(reason, reason_len, "starting: sampling is not attached yet");
		return PP_HEALTH_STARTING;
	}
	if (s->stopping) {
		snprintf(reason, reason_len, "stopping: shipping the last window before exit");
		return PP_HEALTH_STOPPING;
	}
	age = now_ns > s->updated_ns ? now_ns - s->updated_ns : 0;
	if (l->stall_ns && age > l->stall_ns) {
		snprintf(reason, reason_len,
			 "sampling stopped: the run loop has not ticked for %.1f s (limit %.1f s)",
			 secs(age), secs(l->stall_ns));
		return PP_HEALTH_LOOP_STALLED;
	}
	age = now_ns > s->progress_ns ? now_ns - s->progress_ns : 0;
	if (l->stall_ns && age > l->stall_ns) {
		snprintf(reason, reason_len,
			 "sampling stopped: no samples from the kernel for %.1f s (limit %.1f s)",
			 secs(age), secs(l->stall_ns));
		return PP_HEALTH_NO_SAMPLES;
	}
	if (l->failed_windows && s->failures_in_a_row >= l->failed_windows) {
		char last[48] = "";

		if (s->has_transport && s->transport.last_status)
			snprintf(last, sizeof(last), " (last HTTP status %ld)",
				 s->transport.last_status);
		else if (s->has_transport)
			snprintf(last, sizeof(last), " (last attempt got no response)");
		snprintf(reason, reason_len,
			 "exports failing: the last %u exports in a row failed%s",
			 s->failures_in_a_row, last);
		return PP_HEALTH_EXPORT_FAILED_WINDOWS;
	}
	if (l->export_fail_ns && s->export_failing_since_ns) {
		age = now_ns > s->export_failing_since_ns ? now_ns - s->export_failing_since_ns : 0;
		if (age > l->export_fail_ns) {
			snprintf(reason, reason_len,
				 "exports failing: nothing delivered for %.0f s (limit %.0f s)",
				 secs(age), secs(l->export_fail_ns));
			return PP_HEALTH_EXPORT_FAILING;
		}
	}
	if (l->queue_age_ns && s->has_transport &&
	    s->transport.oldest_queued_age_ms * 1000000ull > l->queue_age_ns) {
		snprintf(
		    reason, reason_len,
		    "exports behind: the oldest queued window has waited %.0f s (limit %.0f s); "
		    "%llu requests queued",
		    (double)s->transport.oldest_queued_age_ms / 1000.0, secs(l->queue_age_ns),
		    (unsigned long long)s->transport.queue.items);
		return PP_HEALTH_EXPORT_BEHIND;
	}
	if (s->unreadable_pct >= PP_HEALTH_UNREADABLE_PCT)
		snprintf(reason, reason_len,
			 "ok; degraded: %u%% of the last window's samples come from processes "
			 "whose maps or binaries cannot be read (CAP_SYS_PTRACE missing, or "
			 "AppArmor): their "
			 "user frames are bare",
			 s->unreadable_pct);
	else
		snprintf(reason, reason_len, "ok");
	return PP_HEALTH_OK;
}

/* ---- metrics ------------------------------------------------------------------------------ */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

static void labelled(FILE *f, const char *name, const char *label, const char *lv, uint64_t v)
{
	fprintf(f, "%s{%s=\"%s\"} %llu\n", name, label, lv, (unsigned long long)v);
}

/* Label values from outside our tables (the version) get the format's escapes. */
static void escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void render_sampling(FILE *f, const struct pp_health_snapshot *s)
{
	static const char *const lost = "pebsprof_lost_samples_total";
	static const char *const unres = "pebsprof_frames_unresolved_total";
	static const char *const copies = "pebsprof_stack_copies_total";

	family(f, "pebsprof_samples_total", "counter", "Samples added to profiles.");
	value(f, "pebsprof_samples_total", s->samples);
	family(
	    f, "pebsprof_samples_unreadable_total", "counter",
	    "Samples of processes whose maps or binaries could not be read although they run (no "
	    "CAP_SYS_PTRACE, AppArmor): their user frames are bare.");
	value(f, "pebsprof_samples_unreadable_total", s->samples_unreadable);
	family(f, "pebsprof_samples_late_total", "counter",
	       "Samples read after their window had closed (past its grace): in the next window, "
	       "without a time.");
	value(f, "pebsprof_samples_late_total", s->samples_late);
	family(f, lost, "counter",
	       "Samples lost before reaching a profile, by reason: in the kernel (ringbuf_full, "
	       "scratch_miss), malformed ring-buffer records (record_*), refused by the profile "
	       "(profile_refused).");
	labelled(f, lost, "reason", "ringbuf_full", s->shim[PP_CNT_RB_FULL]);
	labelled(f, lost, "reason", "scratch_miss", s->shim[PP_CNT_SCRATCH_MISS]);
	labelled(f, lost, "reason", "record_too_short", s->decode.too_short);
	labelled(f, lost, "reason", "record_bad_size", s->decode.bad_size);
	labelled(f, lost, "reason", "record_bad_type", s->decode.bad_type);
	labelled(f, lost, "reason", "record_bad_version", s->decode.bad_version);
	labelled(f, lost, "reason", "record_bad_stack", s->decode.bad_stack);
	labelled(f, lost, "reason", "record_bad_stack_copy", s->decode.bad_raw);
	labelled(f, lost, "reason", "profile_refused", s->add_errors);
	family(f, "pebsprof_shim_events_total", "counter",
	       "Counters of the BPF program, summed over CPUs.");
	for (int c = 0; c < PP_CNT__MAX; c++)
		labelled(f, "pebsprof_shim_events_total", "counter",
			 pp_counter_name((enum pp_counter)c), s->shim[c]);
	family(f, "pebsprof_samples_without_process_total", "counter",
	       "Samples kept without process metadata (the process was gone).");
	value(f, "pebsprof_samples_without_process_total", s->samples_no_process);
	family(f, "pebsprof_samples_of_replaced_images_total", "counter",
	       "Samples taken in an image its process replaced by an exec before they were read, "
	       "by whether that image was still kept (kept: named with its own mappings; "
	       "not_kept: more execs since than kept, left without a process).");
	labelled(f, "pebsprof_samples_of_replaced_images_total", "image", "kept",
		 s->samples_of_replaced_images);
	labelled(f, "pebsprof_samples_of_replaced_images_total", "image", "not_kept",
		 s->samples_of_images_not_kept);
	family(
	    f, copies, "counter",
	    "Samples of a process whose unwind tables the shim did not have yet, which carried a "
	    "copy of their stack, by what its walk once the tables were in gave: whole, short "
	    "(the copy ended, no CFI, another stop), or left as the shim walked them (no_tables, "
	    "not_walked).");
	labelled(f, copies, "result", "whole", s->copies_whole);
	labelled(f, copies, "result", "short_copy_ended", s->copies_short_copy_ended);
	labelled(f, copies, "result", "short_no_cfi", s->copies_short_no_cfi);
	labelled(f, copies, "result", "short_other", s->copies_short_other);
	labelled(f, copies, "result", "no_tables", s->copies_no_tables);
	labelled(f, copies, "result", "not_walked", s->copies_refused);
	family(f, "pebsprof_stack_copies_of_replaced_images_total", "counter",
	       "Of those, copies taken in an image its process replaced by an exec since (a "
	       "wrapper's), walked with that image's mappings.");
	value(f, "pebsprof_stack_copies_of_replaced_images_total", s->copies_of_replaced_images);
	family(f, "pebsprof_frames_total", "counter", "Frames symbolized, cache hits included.");
	value(f, "pebsprof_frames_total", s->frames);
	family(f, unres, "counter",
	       "Frames left without a symbol, by reason (not_code: a return address outside "
	       "executable memory, where the user stack was cut).");
	labelled(f, unres, "reason", "unmapped", s->frames_unmapped);
	labelled(f, unres, "reason", "no_symbol", s->frames_no_symbol);
	labelled(f, unres, "reason", "no_file", s->frames_no_file);
	labelled(f, unres, "reason", "not_code", s->frames_not_code);
	family(f, "pebsprof_frames_named_total", "counter",
	       "Distinct frames named (once per window), by where the name came from.");
	for (int i = 0; i < PP_HEALTH_NAME_SOURCES; i++)
		if (s->frames_named_source[i])
			labelled(f, "pebsprof_frames_named_total", "source",
				 s->frames_named_source[i], s->frames_named[i]);
	family(f, "pebsprof_frames_unnamed_total", "counter",
	       "Distinct frames no source named: sent as file+0xaddr for a backend to name.");
	value(f, "pebsprof_frames_unnamed_total", s->frames_unnamed);
	if (s->data_types_result[0]) {
		family(f, "pebsprof_data_types_total", "counter",
		       "Memory samples with an exact IP, by what naming the data type and field "
		       "they access gave: typed, waiting for the loader, or why not.");
		for (int i = 0; i < PP_HEALTH_DATA_TYPE_RESULTS; i++)
			if (s->data_types_result[i])
				labelled(f, "pebsprof_data_types_total", "result",
					 s->data_types_result[i], s->data_types[i]);
	}
	family(f, "pebsprof_perf_map_refused_total", "counter",
	       "JIT perf map files refused: a link, not a regular file, another user's.");
	value(f, "pebsprof_perf_map_refused_total", s->perf_map_refused);
	family(f, "pebsprof_perf_map_bad_lines_total", "counter",
	       "JIT perf map lines that did not parse (skipped).");
	value(f, "pebsprof_perf_map_bad_lines_total", s->perf_map_bad_lines);
	if (s->unwind_rows_total) {
		family(f, "pebsprof_unwind_tables_built_total", "counter",
		       "Files whose .eh_frame was compiled into an unwind table.");
		value(f, "pebsprof_unwind_tables_built_total", s->unwind_tables_built);
		family(f, "pebsprof_unwind_tables_shared_total", "counter",
		       "Mappings served by a table built before (same build id).");
		value(f, "pebsprof_unwind_tables_shared_total", s->unwind_tables_shared);
		family(f, "pebsprof_unwind_tables_without_cfi_total", "counter",
		       "Files with no usable CFI: their frames walk frame pointers.");
		value(f, "pebsprof_unwind_tables_without_cfi_total", s->unwind_tables_none);
		family(f, "pebsprof_unwind_tables_evicted_total", "counter",
		       "Unused tables removed to make room in the row budget.");
		value(f, "pebsprof_unwind_tables_evicted_total", s->unwind_tables_evicted);
		family(f, "pebsprof_unwind_tables_rebuilt_total", "counter",
		       "Tables compiled again after they were evicted.");
		value(f, "pebsprof_unwind_tables_rebuilt_total", s->unwind_tables_rebuilt);
		family(f, "pebsprof_unwind_partial_tables_total", "counter",
		       "Big files given partial tables (their rows found as walks of samples' "
		       "stack copies reach their code), and of them compiled whole since.");
		labelled(f, "pebsprof_unwind_partial_tables_total", "event", "started",
			 s->unwind_partial_tables);
		labelled(f, "pebsprof_unwind_partial_tables_total", "event", "compiled_whole",
			 s->unwind_partial_promoted);
		family(f, "pebsprof_unwind_partial_fdes_total", "counter",
		       "FDEs found and compiled for walks through partial tables.");
		value(f, "pebsprof_unwind_partial_fdes_total", s->unwind_partial_fdes);
		family(f, "pebsprof_unwind_partial_writes_total", "counter",
		       "Runs of partial tables written again with the rows found.");
		value(f, "pebsprof_unwind_partial_writes_total", s->unwind_partial_writes);
		if (s->unwind_cache_on) {
			family(f, "pebsprof_unwind_tables_from_cache_total", "counter",
			       "Tables read from the on-disk cache instead of compiled.");
			value(f, "pebsprof_unwind_tables_from_cache_total",
			      s->unwind_tables_from_cache);
			family(
			    f, "pebsprof_unwind_cache_files_total", "counter",
			    "Files of the on-disk table cache, by what happened to them: stored, "
			    "refused (torn, altered or of another version: removed), trimmed (the "
			    "bound) or failed (a write that did not complete).");
			labelled(f, "pebsprof_unwind_cache_files_total", "event", "stored",
				 s->unwind_cache_stored);
			labelled(f, "pebsprof_unwind_cache_files_total", "event", "refused",
				 s->unwind_cache_refused);
			labelled(f, "pebsprof_unwind_cache_files_total", "event", "trimmed",
				 s->unwind_cache_trimmed);
			labelled(f, "pebsprof_unwind_cache_files_total", "event", "failed",
				 s->unwind_cache_failed);
			family(f, "pebsprof_unwind_cache_bytes", "gauge",
			       "Bytes of the on-disk table cache.");
			value(f, "pebsprof_unwind_cache_bytes", s->unwind_cache_bytes);
		}
		family(f, "pebsprof_unwind_installs_total", "counter",
		       "Processes' unwind lists written, by where their mappings came from: those "
		       "the agent holds, followed by the kernel's reports (sideband; a process "
		       "read from /proc once, before, included), or a read of /proc/PID/maps for "
		       "the list (proc: where the kernel reports no mappings).");
		labelled(f, "pebsprof_unwind_installs_total", "source", "sideband",
			 s->unwind_procs_from_events);
		labelled(f, "pebsprof_unwind_installs_total", "source", "proc",
			 s->unwind_maps_reads);
		family(f, "pebsprof_unwind_tables_no_room_total", "counter",
		       "Tables that did not fit the row budget (--unwind-table-bytes).");
		value(f, "pebsprof_unwind_tables_no_room_total", s->unwind_tables_no_room);
		family(f, "pebsprof_unwind_tables_too_big_total", "counter",
		       "Tables over the rows one table may have, or spanning 4 GiB of code.");
		value(f, "pebsprof_unwind_tables_too_big_total", s->unwind_tables_too_big);
		family(
		    f, "pebsprof_unwind_rows", "gauge",
		    "Rows of unwind tables in the kernel (4 bytes each, pages' words included).");
		value(f, "pebsprof_unwind_rows", s->unwind_rows_used);
		family(f, "pebsprof_unwind_rows_capacity", "gauge",
		       "Rows the unwind table budget holds.");
		value(f, "pebsprof_unwind_rows_capacity", s->unwind_rows_total);
		family(f, "pebsprof_unwind_rules", "gauge",
		       "Distinct unwind rules the tables in the kernel share (at most 65536).");
		value(f, "pebsprof_unwind_rules", s->unwind_rules_used);
		family(f, "pebsprof_unwind_processes", "gauge",
		       "Processes whose mappings the shim unwinds with tables.");
		value(f, "pebsprof_unwind_processes", s->unwind_procs_live);
		family(f, "pebsprof_unwind_processes_no_room_total", "counter",
		       "Process lists the shim's array of list entries had no room for (their "
		       "samples carry stack copies).");
		value(f, "pebsprof_unwind_processes_no_room_total", s->unwind_procs_no_room);
	}
	family(f, "pebsprof_process_images_total", "counter",
	       "Process images the collector made, by source: the kernel's side-band reports of "
	       "exec and fork (sideband), reads of /proc (proc: a process's first, and rereads "
	       "for an address none of its mappings held).");
	labelled(f, "pebsprof_process_images_total", "source", "sideband",
		 s->process_images_reported);
	labelled(f, "pebsprof_process_images_total", "source", "proc", s->process_reads);
	labelled(f, "pebsprof_process_images_total", "source", "proc_reread",
		 s->process_map_rereads);
	family(f, "pebsprof_sideband_records_total", "counter",
	       "Records of the kernel's side-band (mmap, comm, fork, exit) read, and those the "
	       "kernel dropped because the ring was full (lost).");
	labelled(f, "pebsprof_sideband_records_total", "result", "read", s->sideband_records);
	labelled(f, "pebsprof_sideband_records_total", "result", "lost", s->sideband_lost);
	if (s->process_cache_entries >= 0) {
		family(f, "pebsprof_process_cache_entries", "gauge", "Processes in the cache.");
		value(f, "pebsprof_process_cache_entries", (uint64_t)s->process_cache_entries);
	}
	if (s->symbol_cache_files >= 0) {
		family(f, "pebsprof_symbol_cache_files", "gauge",
		       "Files in the symbol cache, remembered failures included.");
		value(f, "pebsprof_symbol_cache_files", (uint64_t)s->symbol_cache_files);
	}
	family(f, "pebsprof_cache_bytes", "gauge",
	       "Bytes each cache holds: processes (maps), symbols (ELF tables; bound "
	       "symbol-cache-bytes), frames, raw stacks (before they reach the window), "
	       "mem_objects.");
	labelled(f, "pebsprof_cache_bytes", "cache", "processes", s->process_cache_bytes);
	labelled(f, "pebsprof_cache_bytes", "cache", "symbols", s->symbol_cache_bytes);
	labelled(f, "pebsprof_cache_bytes", "cache", "frames", s->frame_cache_bytes);
	labelled(f, "pebsprof_cache_bytes", "cache", "raw_stacks", s->raw_stack_bytes);
	labelled(f, "pebsprof_cache_bytes", "cache", "mem_objects", s->mem_obj_cache_bytes);
	family(f, "pebsprof_symbol_cache_evictions_total", "counter",
	       "Symbol tables evicted (least recently used) to stay within the cache's bounds.");
	value(f, "pebsprof_symbol_cache_evictions_total", s->symbol_evictions);
	family(f, "pebsprof_symbol_cache_too_big_total", "counter",
	       "Symbol tables larger than symbol-cache-bytes alone: not kept, their frames "
	       "unnamed.");
	value(f, "pebsprof_symbol_cache_too_big_total", s->symbol_too_big);
	if (s->symbol_store_on) {
		family(f, "pebsprof_symbol_tables_from_disk_total", "counter",
		       "Symbol tables read back from the on-disk symbol table cache instead of "
		       "read from their files.");
		value(f, "pebsprof_symbol_tables_from_disk_total", s->symbol_store_hits);
		family(f, "pebsprof_symbol_disk_files_total", "counter",
		       "Files of the on-disk symbol table cache, by what happened to them: stored, "
		       "unsettled (not stored: the file changed under 2 s before), refused (torn, "
		       "altered, of another boot or version: removed), trimmed (the bound) or "
		       "failed (a write that did not complete).");
		labelled(f, "pebsprof_symbol_disk_files_total", "event", "stored",
			 s->symbol_store_stored);
		labelled(f, "pebsprof_symbol_disk_files_total", "event", "unsettled",
			 s->symbol_store_unsettled);
		labelled(f, "pebsprof_symbol_disk_files_total", "event", "refused",
			 s->symbol_store_refused);
		labelled(f, "pebsprof_symbol_disk_files_total", "event", "trimmed",
			 s->symbol_store_trimmed);
		labelled(f, "pebsprof_symbol_disk_files_total", "event", "failed",
			 s->symbol_store_failed);
		family(f, "pebsprof_symbol_disk_bytes", "gauge",
		       "Bytes of the on-disk symbol table cache.");
		value(f, "pebsprof_symbol_disk_bytes", s->symbol_store_bytes);
	}
	family(f, "pebsprof_files_refused_total", "counter",
	       "Files other processes mapped that were not read, by reason: sparse (tables "
	       "claimed where the file has a hole), not_the_mapped_file (the path led elsewhere), "
	       "unreachable (gone, not a regular file), and unwind tables refused for their "
	       "claims (unwind_claims).");
	labelled(f, "pebsprof_files_refused_total", "reason", "sparse", s->symbol_refused_sparse);
	labelled(f, "pebsprof_files_refused_total", "reason", "not_the_mapped_file",
		 s->symbol_not_mapped_file);
	labelled(f, "pebsprof_files_refused_total", "reason", "unreachable", s->symbol_unreachable);
	labelled(f, "pebsprof_files_refused_total", "reason", "unwind_claims",
		 s->unwind_tables_refused);
	family(f, "pebsprof_frames_awaited_total", "counter",
	       "Frames made while their file's symbols were being read (placeholders), and of "
	       "those finished in place when the table came.");
	labelled(f, "pebsprof_frames_awaited_total", "state", "made", s->frames_awaited);
	labelled(f, "pebsprof_frames_awaited_total", "state", "finished",
		 s->frames_awaited_finished);
	family(
	    f, "pebsprof_symbol_tables_at_once_total", "counter",
	    "Mappings of new processes given the symbol table the loader brought lately for the "
	    "file their identity names: their frames named at once, nothing asked or waited for.");
	value(f, "pebsprof_symbol_tables_at_once_total", s->symbol_tables_at_once);
	family(f, "pebsprof_frames_named_again_total", "counter",
	       "Frames named again (in a new window, or once their file's identity expired) from "
	       "the name their symbol table gave before: no search of the table, no demangling.");
	value(f, "pebsprof_frames_named_again_total", s->names_memoized);
	family(f, "pebsprof_strings_cleaned_total", "counter",
	       "Strings from processes (names, paths, comm) that were not valid UTF-8 or held "
	       "control characters, sent cleaned.");
	value(f, "pebsprof_strings_cleaned_total", s->strings_cleaned);
}

static void render_transport(FILE *f, const struct pp_health_snapshot *s)
{
	static const char *const req = "pebsprof_export_requests_total";
	const struct pp_transport_stats *t = &s->transport;

	family(f, req, "counter",
	       "Upload requests by outcome: ok (2xx), retried (a failed attempt to be retried), "
	       "split (too large: 413, or 400 saying so; resent in halves), and the drops.");
	labelled(f, req, "outcome", "ok", t->sent);
	labelled(f, req, "outcome", "retried", t->retried);
	labelled(f, req, "outcome", "split", t->split_needed);
	labelled(f, req, "outcome", "dropped_4xx", t->dropped_4xx);
	labelled(f, req, "outcome", "dropped_5xx", t->dropped_5xx);
	labelled(f, req, "outcome", "gave_up", t->dropped_give_up);
	labelled(f, req, "outcome", "dropped_other", t->dropped_other);
	labelled(f, req, "outcome", "dropped_shutdown", t->dropped_shutdown);
	labelled(f, req, "outcome", "too_big", t->dropped_too_big);
	labelled(f, req, "outcome", "queue_full", t->queue.dropped_overflow);
	family(f, "pebsprof_export_attempts_total", "counter", "HTTP attempts started.");
	value(f, "pebsprof_export_attempts_total", t->attempts);
	family(f, "pebsprof_export_transport_errors_total", "counter",
	       "Attempts that got no HTTP response (refused, reset, timeout).");
	value(f, "pebsprof_export_transport_errors_total", t->transport_errors);
	family(f, "pebsprof_export_sent_bytes_total", "counter",
	       "Bytes delivered, as sent on the wire (compressed).");
	value(f, "pebsprof_export_sent_bytes_total", t->sent_bytes);
	family(f, "pebsprof_export_dropped_bytes_total", "counter",
	       "Queued bytes of requests dropped, queue overflow included.");
	value(f, "pebsprof_export_dropped_bytes_total",
	      t->dropped_bytes + t->queue.dropped_overflow_bytes);
	family(f, "pebsprof_export_rejected_profiles_total", "counter",
	       "Profiles the backend rejected in a partial success.");
	value(f, "pebsprof_export_rejected_profiles_total", t->rejected_profiles);
	family(f, "pebsprof_export_split_total", "counter",
	       "Requests the server found too large (HTTP 413, or 400 saying so): resent as two "
	       "halves, or dropped (one sample, cannot be split).");
	labelled(f, "pebsprof_export_split_total", "result", "resent", s->split_resent);
	labelled(f, "pebsprof_export_split_total", "result", "dropped", s->split_dropped);
	family(f, "pebsprof_export_queue_bytes", "gauge", "Bytes waiting in the upload queue.");
	value(f, "pebsprof_export_queue_bytes", t->queue.bytes);
	family(f, "pebsprof_export_queue_requests", "gauge",
	       "Requests waiting in the upload queue.");
	value(f, "pebsprof_export_queue_requests", t->queue.items);
	family(f, "pebsprof_export_queue_capacity_bytes", "gauge", "Bound of the upload queue.");
	value(f, "pebsprof_export_queue_capacity_bytes", t->queue.cap_bytes);
	family(f, "pebsprof_export_last_http_status", "gauge",
	       "Status of the last HTTP response (0: none yet, or no response).");
	value(f, "pebsprof_export_last_http_status",
	      (uint64_t)(t->last_status > 0 ? t->last_status : 0));
}

static const int http_codes[6] = {200, 400, 404, 405, 431, 503};

/* The agent's CPU by thread (base/self_cpu.h); the names are [a-z0-9_-] as read. */
static void render_cpu(FILE *f, const struct pp_self_cpu *c)
{
	if (!c->total_ns && !c->n)
		return;
	family(f, "pebsprof_cpu_seconds_total", "counter",
	       "The agent's CPU time, user and system, by thread: main (the ring buffer, the "
	       "side-band, naming frames, windows), unwinder, symloader, sender, health; exited: "
	       "threads that ended.");
	for (size_t i = 0; i < c->n; i++)
		fprintf(f, "pebsprof_cpu_seconds_total{thread=\"%s\"} %.3f\n", c->threads[i].name,
			secs(c->threads[i].ns));
	fprintf(f, "pebsprof_cpu_seconds_total{thread=\"exited\"} %.3f\n", secs(c->exited_ns));
}

int pp_metrics_render(const struct pp_health_snapshot *s, const struct pp_health_limits *l,
		      uint64_t now_ns, char **out, size_t *len)
{
	enum pp_health_status st = pp_health_check(s, l, now_ns, NULL, 0);
	uint64_t failing = 0;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return -ENOMEM;
	family(f, "pebsprof_up", "gauge", "1 while the agent runs.");
	value(f, "pebsprof_up", 1);
	family(f, "pebsprof_build_info", "gauge", "The agent's version, as a label.");
	fputs("pebsprof_build_info{version=\"", f);
	escaped(f, PP_VERSION);
	fputs("\"} 1\n", f);
	family(f, "pebsprof_healthy", "gauge", "1 when /healthz answers 200, else 0.");
	value(f, "pebsprof_healthy", st == PP_HEALTH_OK);
	render_cpu(f, &s->cpu);
	render_sampling(f, s);
	family(f, "pebsprof_windows_total", "counter", "Windows closed at an interval boundary.");
	value(f, "pebsprof_windows_total", s->windows_closed);
	family(f, "pebsprof_windows_exported_total", "counter",
	       "Non-empty windows handed to the exporter (queued for upload or written).");
	value(f, "pebsprof_windows_exported_total", s->windows_exported);
	family(f, "pebsprof_export_failures_total", "counter",
	       "Exports that failed: requests dropped after retries or refused, windows not "
	       "queued or not written.");
	value(f, "pebsprof_export_failures_total", s->export_failures);
	family(f, "pebsprof_export_failures_in_a_row", "gauge",
	       "Exports failed since the last one that succeeded.");
	value(f, "pebsprof_export_failures_in_a_row", s->failures_in_a_row);
	if (s->export_failing_since_ns && now_ns > s->export_failing_since_ns)
		failing = now_ns - s->export_failing_since_ns;
	family(f, "pebsprof_export_failing_seconds", "gauge",
	       "How long uploads have failed with nothing delivered; 0 when they work.");
	fprintf(f, "pebsprof_export_failing_seconds %.3f\n", secs(failing));
	family(f, "pebsprof_export_cut_total", "counter",
	       "Cut before sending to meet the backend's limits: profiles over max-profile-samples "
	       "or max-profile-bytes, requests over max-request-bytes, and requests more to keep "
	       "each within max-burst-bytes.");
	labelled(f, "pebsprof_export_cut_total", "what", "profile", s->profiles_cut);
	labelled(f, "pebsprof_export_cut_total", "what", "request", s->requests_cut);
	labelled(f, "pebsprof_export_cut_total", "what", "burst", s->requests_packed);
	family(f, "pebsprof_export_oversize_samples_total", "counter",
	       "Single samples over max-profile-bytes or max-burst-bytes on their own: sent, and "
	       "likely refused.");
	value(f, "pebsprof_export_oversize_samples_total", s->samples_oversize);
	family(f, "pebsprof_export_label_names_dropped_total", "counter",
	       "Label names left out of exported windows to stay within Pyroscope's 30 per "
	       "series, summed over the windows.");
	value(f, "pebsprof_export_label_names_dropped_total", s->label_names_dropped);
	if (s->has_transport)
		render_transport(f, s);
	family(f, "pebsprof_http_requests_total", "counter",
	       "Requests this endpoint answered, by status code.");
	for (size_t i = 0; i < sizeof(http_codes) / sizeof(http_codes[0]); i++)
		fprintf(f, "pebsprof_http_requests_total{code=\"%d\"} %llu\n", http_codes[i],
			(unsigned long long)s->http.by_status[i]);
	family(f, "pebsprof_http_timeouts_total", "counter",
	       "Connections closed at their deadline before a complete exchange.");
	value(f, "pebsprof_http_timeouts_total", s->http.timeouts);
	family(f, "pebsprof_http_shed_total", "counter",
	       "Connections closed to make room for new ones (the oldest still waiting for its "
	       "request) when the server held as many as it takes.");
	value(f, "pebsprof_http_shed_total", s->http.shed);
	if (fclose(f) || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* ---- responses ---------------------------------------------------------------------------- */

static const char *status_text(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	default:
		return "Service Unavailable";
	}
}

static int path_is(const struct pp_http_request *r, const char *p)
{
	return r->path_len == strlen(p) && !memcmp(r->path, p, r->path_len);
}

int pp_health_response(int parse_ret, const struct pp_http_request *req,
		       const struct pp_health_snapshot *s, const struct pp_health_limits *l,
		       uint64_t now_ns, char **out, size_t *len)
{
	const char *ctype = "text/plain; charset=utf-8";
	char small[256], *body = small, *metrics = NULL, *buf = NULL;
	size_t blen, n = 0;
	int code, head = 0;
	FILE *f;

	if (parse_ret == -EBADMSG) {
		code = 400;
		snprintf(small, sizeof(small), "bad request\n");
	} else if (parse_ret) {
		code = 431;
		snprintf(small, sizeof(small), "request header fields too large (over %d bytes)\n",
			 PP_HTTP_MAX_REQUEST);
	} else if (!path_is(req, "/healthz") && !path_is(req, "/livez") &&
		   !path_is(req, "/metrics")) {
		code = 404;
		snprintf(small, sizeof(small), "not found: try /healthz, /livez or /metrics\n");
	} else if (req->method == PP_HTTP_OTHER) {
		code = 405;
		snprintf(small, sizeof(small), "method not allowed: use GET\n");
	} else if (path_is(req, "/healthz") || path_is(req, "/livez")) {
		struct pp_health_limits live = *l;
		char reason[200];

		/* Liveness: sampling only. A restart cannot bring a backend back. */
		if (path_is(req, "/livez"))
			live.failed_windows = 0, live.export_fail_ns = 0, live.queue_age_ns = 0;
		head = req->method == PP_HTTP_HEAD;
		code = pp_health_check(s, &live, now_ns, reason, sizeof(reason)) == PP_HEALTH_OK
			   ? 200
			   : 503;
		snprintf(small, sizeof(small), "%s\n", reason);
	} else {
		head = req->method == PP_HTTP_HEAD;
		if (pp_metrics_render(s, l, now_ns, &metrics, &blen))
			return -ENOMEM;
		body = metrics;
		code = 200;
		ctype = "text/plain; version=0.0.4; charset=utf-8";
	}
	if (body == small)
		blen = strlen(small);
	f = open_memstream(&buf, &n);
	if (!f) {
		free(metrics);
		return -ENOMEM;
	}
	fprintf(f,
		"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		"Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
		code, status_text(code), ctype, blen, code == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (!head)
		fwrite(body, 1, blen, f);
	free(metrics);
	if (fclose(f) || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return code;
}

/* ---- the server --------------------------------------------------------------------------- */

enum conn_state {
	CONN_FREE = 0,
	CONN_READING,
	CONN_WRITING,
	CONN_DRAINING, /* answer sent and write side shut: read until the client closes */
};

/*
 * One connection. Open ones are on a list in deadline order (every deadline is set to now
 * plus the same PP_HEALTH_IO_TIMEOUT_MS, so appending keeps it sorted): the head is the next
 * to time out and, among those still reading, the first to be shed.
 */
struct conn {
	int fd;
	enum conn_state state;
	uint64_t deadline_ns;
	struct conn *prev, *next;
	char *in; /* PP_HTTP_MAX_REQUEST bytes once the client sent its first byte */
	size_t in_len;
	char *out;
	size_t out_len, out_off;
};

struct pp_health_server {
	int listen_fd;
	int epoll_fd;
	int wake[2]; /* a byte on wake[1] stops the thread */
	uint16_t port;
	pthread_t thread;
	int running;
	struct pp_health_limits limits;
	pthread_mutex_t lock; /* guards snap */
	struct pp_health_snapshot snap;
	struct pp_health_http_stats http; /* the thread's own */
	size_t max_conns, nconns;
	struct conn *conns;	  /* max_conns slots */
	struct conn **free_slots; /* a stack of the free ones */
	size_t nfree;
	struct conn *head, *tail; /* open connections, by deadline */
};

static void list_unlink(struct pp_health_server *s, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->tail = c->prev;
	c->prev = c->next = NULL;
}

static void list_append(struct pp_health_server *s, struct conn *c)
{
	c->prev = s->tail;
	c->next = NULL;
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
}

/* A new deadline, PP_HEALTH_IO_TIMEOUT_MS from now: the connection goes to the list's end. */
static void conn_touch(struct pp_health_server *s, struct conn *c, uint64_t now)
{
	list_unlink(s, c);
	c->deadline_ns = now + PP_HEALTH_IO_TIMEOUT_MS * NS_PER_MS;
	list_append(s, c);
}

static void conn_close(struct pp_health_server *s, struct conn *c)
{
	list_unlink(s, c);
	close(c->fd); /* also leaves the epoll set */
	free(c->in);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	s->free_slots[s->nfree++] = c;
	s->nconns--;
}

static void conn_watch(struct pp_health_server *s, struct conn *c, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};

	if (epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev))
		conn_close(s, c);
}

static void count_status(struct pp_health_server *s, int code)
{
	for (size_t i = 0; i < sizeof(http_codes) / sizeof(http_codes[0]); i++)
		if (http_codes[i] == code)
			s->http.by_status[i]++;
}

static void conn_write(struct pp_health_server *s, struct conn *c)
{
	ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(s, c);
		return;
	}
	c->out_off += (size_t)n;
	if (c->out_off < c->out_len)
		return;
	/* Closing with unread request bytes would reset the connection and could lose the
	 * answer at the client: shut the write side and read until the client closes. */
	shutdown(c->fd, SHUT_WR);
	c->state = CONN_DRAINING;
	conn_watch(s, c, EPOLLIN);
}

static void conn_answer(struct pp_health_server *s, struct conn *c, int parse_ret,
			const struct pp_http_request *req)
{
	struct pp_health_snapshot snap;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	int code;

	pthread_mutex_lock(&s->lock);
	snap = s->snap;
	pthread_mutex_unlock(&s->lock);
	snap.http = s->http;
	/* read where it is shown: /healthz is probed every few seconds, /metrics less */
	if (parse_ret == 0 && path_is(req, "/metrics"))
		(void)pp_self_cpu_read(NULL, &snap.cpu);
	code = pp_health_response(parse_ret, req, &snap, &s->limits, now, &c->out, &c->out_len);
	if (code < 0) {
		conn_close(s, c);
		return;
	}
	count_status(s, code);
	free(c->in); /* the request is answered: its buffer is not needed any more */
	c->in = NULL;
	c->out_off = 0;
	c->state = CONN_WRITING;
	conn_touch(s, c, now);
	conn_write(s, c); /* the socket buffer almost always takes the whole answer at once */
	if (c->fd >= 0 && c->state == CONN_WRITING)
		conn_watch(s, c, EPOLLOUT);
}

static void conn_read(struct pp_health_server *s, struct conn *c)
{
	struct pp_http_request req;
	ssize_t n;
	int ret;

	if (c->state == CONN_DRAINING) {
		char sink[512];

		n = recv(c->fd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(s, c);
		return;
	}
	if (!c->in) {
		c->in = malloc(PP_HTTP_MAX_REQUEST);
		if (!c->in) {
			conn_close(s, c);
			return;
		}
	}
	n = recv(c->fd, c->in + c->in_len, PP_HTTP_MAX_REQUEST - c->in_len, 0);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(s, c);
		return;
	}
	if (n == 0) { /* the client closed before a whole request: nobody to answer */
		conn_close(s, c);
		return;
	}
	c->in_len += (size_t)n;
	ret = pp_http_parse_request(c->in, c->in_len, &req);
	if (ret == -EAGAIN && c->in_len < PP_HTTP_MAX_REQUEST)
		return; /* the deadline set at accept still runs: a slow sender gains nothing */
	conn_answer(s, c, ret == -EAGAIN ? -EMSGSIZE : ret, &req);
}

/*
 * Room for one more connection: the oldest one still waiting for its request goes (it is
 * idle or slow; a client that sent its request in time is past that state). Only when every
 * connection is being answered does the oldest of those go instead.
 */
static void shed_one(struct pp_health_server *s)
{
	struct conn *victim = s->head;

	for (struct conn *c = s->head; c; c = c->next) {
		if (c->state == CONN_READING) {
			victim = c;
			break;
		}
	}
	if (victim) {
		s->http.shed++;
		conn_close(s, victim);
	}
}

/*
 * Takes every connection the kernel has queued: a full accept queue would drop new clients'
 * SYNs (the kubelet's probe among them) for a second or more, so the queue is kept empty and
 * the cap is held by shedding instead.
 */
static void accept_all(struct pp_health_server *s)
{
	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct conn *c;
		int fd;

		if (s->nconns == s->max_conns)
			shed_one(s);
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if ((errno == EMFILE || errno == ENFILE) && s->nconns) {
				shed_one(s); /* out of descriptors: the oldest idle makes room */
				continue;
			}
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		c = s->free_slots[--s->nfree];
		c->fd = fd;
		c->state = CONN_READING;
		s->nconns++;
		c->deadline_ns = 0;
		list_append(s, c);
		conn_touch(s, c, pp_clock_ns(CLOCK_MONOTONIC));
		ev.data.ptr = c;
		if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev))
			conn_close(s, c);
	}
}

/* Closes the connections whose deadline has passed; returns the next deadline's wait, ms. */
static int expire(struct pp_health_server *s, uint64_t now)
{
	while (s->head && s->head->deadline_ns <= now) {
		if (s->head->state != CONN_DRAINING)
			s->http.timeouts++;
		conn_close(s, s->head);
	}
	return s->head ? (int)((s->head->deadline_ns - now) / NS_PER_MS + 1) : -1;
}

static void *server_main(void *arg)
{
	struct pp_health_server *s = arg;
	struct epoll_event evs[64];

	for (;;) {
		int timeout = expire(s, pp_clock_ns(CLOCK_MONOTONIC));
		int n = epoll_wait(s->epoll_fd, evs, 64, timeout);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;

			if (c == NULL)
				goto out; /* the wake pipe */
			if (c == (struct conn *)s) {
				accept_all(s);
				continue;
			}
			if (c->fd < 0)
				continue; /* shed earlier in this round */
			if (c->state == CONN_WRITING)
				conn_write(s, c);
			else
				conn_read(s, c);
		}
	}
out:
	while (s->head)
		conn_close(s, s->head);
	return NULL;
}

int pp_listen_split(const char *addr, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon, *h = addr;
	size_t hl;
	unsigned long p = 0;

	if (!addr || !*addr)
		return -EINVAL;
	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = addr + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - addr);
	}
	if (hl >= hostlen || !colon[1] || strlen(colon + 1) > 5)
		return -EINVAL;
	for (const char *d = colon + 1; *d; d++) {
		if (!isdigit((unsigned char)*d))
			return -EINVAL;
		p = p * 10 + (unsigned long)(*d - '0');
	}
	if (p > 65535)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (uint16_t)p;
	return 0;
}

/* A listening socket on host:port; every interface (dual stack) for an empty host. */
static int open_listener(const char *addr, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	char host[256], portstr[8];
	uint16_t port;
	int fd = -1, ret, one = 1, zero = 0, saved = 0;

	if (pp_listen_split(addr, host, sizeof(host), &port)) {
		snprintf(err, errlen, "listen: bad address '%s' (give ADDR:PORT, e.g. :9090)",
			 addr);
		return -EINVAL;
	}
	snprintf(portstr, sizeof(portstr), "%u", port);
	if (!host[0])
		hints.ai_family = AF_INET6; /* :: with IPV6_V6ONLY off takes IPv4 too */
	ret = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
	if (ret && !host[0]) {
		hints.ai_family = AF_INET;
		ret = getaddrinfo(NULL, portstr, &hints, &res);
	}
	if (ret) {
		snprintf(err, errlen, "listen: cannot resolve '%s': %s", addr, gai_strerror(ret));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0 && !host[0] && ai->ai_family == AF_INET6) {
			/* no IPv6 in this kernel: every IPv4 address instead */
			struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};

			fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			if (fd >= 0 &&
			    !setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) &&
			    !bind(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
			    !listen(fd, SOMAXCONN))
				break;
		} else if (fd >= 0) {
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (ai->ai_family == AF_INET6 && !host[0])
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, SOMAXCONN))
				break;
		}
		saved = errno;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errlen, "listen: cannot listen on %s: %s", addr,
			 strerror(saved ? saved : EADDRNOTAVAIL));
		return -(saved ? saved : EADDRNOTAVAIL);
	}
	return fd;
}

/*
 * How many connections the server holds: PP_HEALTH_MAX_CONNS, or fewer when the descriptor
 * limit would not leave the agent room for its own files (a quarter of it stays ours).
 */
static size_t conn_cap(void)
{
	struct rlimit rl;
	size_t cap = PP_HEALTH_MAX_CONNS;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 4 * 3 < cap + 64)
		cap = rl.rlim_cur / 4 * 3 > 64 + 16 ? (size_t)(rl.rlim_cur / 4 * 3 - 64) : 16;
	return cap;
}

static int watch_fd(struct pp_health_server *s, int fd, void *tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

	return epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

struct pp_health_server *pp_health_server_new(const char *addr,
					      const struct pp_health_limits *limits, char *err,
					      size_t errlen)
{
	struct pp_health_server *s = calloc(1, sizeof(*s));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int ret = -ENOMEM;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->listen_fd = s->epoll_fd = s->wake[0] = s->wake[1] = -1;
	s->limits = *limits;
	pthread_mutex_init(&s->lock, NULL);
	s->max_conns = conn_cap();
	s->conns = calloc(s->max_conns, sizeof(*s->conns));
	s->free_slots = calloc(s->max_conns, sizeof(*s->free_slots));
	if (!s->conns || !s->free_slots) {
		snprintf(err, errlen, "listen: out of memory");
		goto fail;
	}
	for (size_t i = s->max_conns; i-- > 0;) {
		s->conns[i].fd = -1;
		s->free_slots[s->nfree++] = &s->conns[i];
	}
	s->listen_fd = open_listener(addr, err, errlen);
	if (s->listen_fd < 0) {
		ret = s->listen_fd;
		goto fail;
	}
	if (!getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl))
		s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							 : ((struct sockaddr_in *)&ss)->sin_port);
	s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epoll_fd < 0 || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
		ret = -errno;
		snprintf(err, errlen, "listen: %s", strerror(errno));
		goto fail;
	}
	/* the tags: the server itself for the listening socket, NULL for the wake pipe */
	ret = watch_fd(s, s->listen_fd, s);
	if (!ret)
		ret = watch_fd(s, s->wake[0], NULL);
	if (ret) {
		snprintf(err, errlen, "listen: %s", strerror(-ret));
		goto fail;
	}
	ret = -pthread_create(&s->thread, NULL, server_main, s);
	if (ret) {
		snprintf(err, errlen, "listen: cannot start the server thread: %s", strerror(-ret));
		goto fail;
	}
	pthread_setname_np(s->thread, "pp-health"); /* top -H, perf: which thread */
	s->running = 1;
	return s;
fail:
	pp_health_server_free(s);
	errno = -ret;
	return NULL;
}

uint16_t pp_health_server_port(const struct pp_health_server *s)
{
	return s->port;
}

void pp_health_server_update(struct pp_health_server *s, const struct pp_health_snapshot *snap)
{
	pthread_mutex_lock(&s->lock);
	s->snap = *snap;
	pthread_mutex_unlock(&s->lock);
}

void pp_health_server_free(struct pp_health_server *s)
{
	if (!s)
		return;
	if (s->running) {
		char b = 1;

		while (write(s->wake[1], &b, 1) < 0 && errno == EINTR)
			;
		pthread_join(s->thread, NULL);
	}
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->wake[0] >= 0)
		close(s->wake[0]);
	if (s->wake[1] >= 0)
		close(s->wake[1]);
	if (s->epoll_fd >= 0)
		close(s->epoll_fd);
	pthread_mutex_destroy(&s->lock);
	free(s->conns);
	free(s->free_slots);
	free(s);
}

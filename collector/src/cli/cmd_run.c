/*
 * `pebsprof run`: the node agent. Samples continuously, closes a profile at every aligned
 * window boundary, and ships it: OTLP or Pyroscope over HTTP through the exporter's bounded
 * queue (a sender thread does the network I/O, so sampling never waits on it), or, without an
 * endpoint, as OTLP and pprof files in a local directory bounded by count. With --listen it
 * also serves /healthz and /metrics (health.c) from a snapshot taken once per poll tick.
 */
#define _GNU_SOURCE /* asprintf */
#include "cmd_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/otlp.h>
#include <pebsprof/profile.h>
#include <pebsprof/pyroscope.h>
#include <pebsprof/split.h>
#include <pebsprof/transport.h>
#include <pebsprof/writers.h>

#include "cli_util.h"
#include "config.h"
#include "containers.h"
#include "agent/health.h"
#include "base/deadline.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "metadata/host_name.h"
#include "symbolize/symbol_store.h"
#include "sampler.h"
#include "session.h"

#define POLL_INTERVAL_MS PP_SHIM_POLL_PROMPT_MS
#define NS_PER_S 1000000000ull

extern char **environ;

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* Everything the agent owns; one instance, torn down in reverse order by agent_fini. */
struct agent {
	struct pp_run_config cfg;
	struct pp_symbolizer sym; /* debug directories, debuginfod; the session borrows them */
	struct pp_sampler smp;	  /* system, events, kernel symbols, shim */
	struct pp_session *session;
	int kernel_image_said; /* the kernel image's search state last logged (0: none yet) */
	struct pp_containers containers; /* cgroup -> container and pod; the session borrows it */
	struct pp_profile *profile;	 /* the open window */
	struct pp_profile_desc desc;
	char host[256];
	struct pp_label *attrs; /* resource attributes from the configuration */
	uint32_t nattrs;
	/* Network export. */
	struct pp_transport *transport;
	pthread_t sender;
	int sender_running;
	atomic_int sender_stop;
	atomic_int export_failing; /* last result was a failure: log only on change */
	/* Too large for the server (413, 400): requests split and resent, and those that could
	 * not be split (dropped) */
	atomic_uint_fast64_t split_resent, split_dropped;
	/* Cut before sending to meet the backend's limits (split.h): profiles over the sample
	 * or byte limit, requests over max-request-bytes; single samples over the byte limit. */
	uint64_t profiles_cut, requests_cut, requests_packed, samples_oversize;
	uint64_t label_names_dropped; /* summed over the windows sent (Pyroscope's limit) */
	uint64_t strings_cleaned;     /* summed over the windows closed */
	int label_drop_said;	      /* the names left out were logged once */
	/* Queue-overflow drops: when last said, and how many since. */
	uint64_t queue_drop_said_ns, queue_drops_unsaid;
	uint64_t window_seq;
	int64_t mono_to_wall_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC, as the session has it */
	/* Samples with unreadable maps: the counts at the last window's close, and its share. */
	uint64_t seen_samples, seen_unreadable;
	uint32_t unreadable_pct;
	/* A closed window waiting for its jittered upload time (network exporters only). */
	struct pp_profile *pending;
	uint64_t pending_due_ns;
	uint64_t rng;
	/* Health endpoint (--listen); the counters below feed its snapshot. */
	struct pp_health_server *health;
	uint64_t windows_closed;
	atomic_uint_fast64_t export_failures;	/* see health.h, rule "export" */
	atomic_uint_fast32_t failures_in_a_row; /* reset by a delivery or a written window */
	uint64_t health_tick_ns;		/* monotonic time of the last snapshot */
	uint64_t progress_ns, seen_kernel;	/* kernel-side progress: when, and the count then */
	uint64_t failing_since_ns, seen_sent, seen_failed;
};

static void transport_log(void *ctx, enum pp_transport_log_level level, const char *msg)
{
	(void)ctx;
	switch (level) {
	case PP_TRANSPORT_LOG_ERROR:
		pp_error("export: %s", msg);
		break;
	case PP_TRANSPORT_LOG_WARN:
		pp_warn("export: %s", msg);
		break;
	case PP_TRANSPORT_LOG_INFO:
		pp_info("export: %s", msg);
		break;
	default:
		pp_debug("export: %s", msg);
	}
}

/*
 * Too large (HTTP 413, or a 400 that says so): the transport hands the body back and it goes
 * out again as two requests (OTLP's rule), an OTLP body cut by resources or samples, a
 * pprof one by samples. This runs on the thread that polls the transport (the sender, or the
 * shutdown drain), so the sampling loop never spends time splitting; halves that are still
 * too large come back here and are split again, down to single samples, which are dropped.
 */
static void resend_halves(struct agent *ag, const struct pp_send_result *res)
{
	struct pp_send_meta meta = {.kind = res->kind, .tag = res->tag};
	uint8_t *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	int ret = -EINVAL, ret2;

	if (res->meta)
		meta = *res->meta;
	if (res->body)
		ret = res->kind == PP_SEND_OTLP
			  ? pp_otlp_split_request(res->body, res->len, &a, &la, &b, &lb)
			  : pp_pprof_split(res->body, res->len, &a, &la, &b, &lb);
	free(res->body);
	if (ret) {
		atomic_fetch_add(&ag->split_dropped, 1);
		atomic_fetch_add(&ag->export_failures, 1);
		atomic_fetch_add(&ag->failures_in_a_row, 1);
		if (ret == -E2BIG)
			pp_warn("window %llu: dropped a request of one sample (%zu bytes) that %s "
				"finds too large (HTTP %ld); it cannot be split further",
				(unsigned long long)res->tag, res->len, ag->cfg.endpoint,
				res->http_status);
		else
			pp_warn("window %llu dropped: cannot split it after HTTP %ld: %s",
				(unsigned long long)res->tag, res->http_status, strerror(-ret));
		return;
	}
	pp_info("window %llu (%zu bytes) is too large for %s (HTTP %ld): resent as two requests "
		"of %zu and %zu bytes",
		(unsigned long long)res->tag, res->len, ag->cfg.endpoint, res->http_status, la, lb);
	ret = pp_transport_push(ag->transport, a, la, &meta);
	ret2 = pp_transport_push(ag->transport, b, lb, &meta);
	if (ret || ret2) {
		atomic_fetch_add(&ag->split_dropped, 1);
		pp_warn("window %llu: half of it not queued for export after HTTP %ld: %s",
			(unsigned long long)res->tag, res->http_status,
			strerror(ret ? -ret : -ret2));
		return;
	}
	atomic_fetch_add(&ag->split_resent, 1);
}

/* How each request ended: counted for health; one too large is split and sent again. */
static void transport_result(void *ctx, const struct pp_send_result *res)
{
	struct agent *ag = ctx;
	int failing;

	if (res->outcome == PP_SEND_SPLIT) { /* not a failure of the backend: no state change */
		resend_halves(ag, res);
		return;
	}
	/* The transport says when an outage starts, changes and ends (as attempts fail, not
	 * when a request is finally given up); here a lost request is counted for health. */
	failing = res->outcome != PP_SEND_DELIVERED;
	atomic_store(&ag->export_failing, failing);
	if (failing) {
		atomic_fetch_add(&ag->export_failures, 1);
		atomic_fetch_add(&ag->failures_in_a_row, 1);
	} else {
		atomic_store(&ag->failures_in_a_row, 0);
	}
}

static void *sender_main(void *arg)
{
	struct agent *ag = arg;

	while (!atomic_load(&ag->sender_stop)) {
		uint64_t next_due = UINT64_MAX;

		pp_transport_poll(ag->transport, &next_due);
		pp_transport_wait(ag->transport, 500);
	}
	return NULL;
}

static int setup_export(struct agent *ag, char *err, size_t errlen)
{
	struct pp_transport_config tc;
	char app_name[PP_PYROSCOPE_NAME_MAX];
	char *headers = NULL;
	size_t len = 0;

	if (ag->cfg.exporter == PP_EXPORTER_FILE) {
		int ret = pp_mkdir_parents(ag->cfg.output_dir, 0755);

		if (ret)
			snprintf(err, errlen, "cannot create output directory %s: %s",
				 ag->cfg.output_dir, strerror(-ret));
		return ret;
	}
	pp_transport_config_init(&tc);
	tc.protocol = ag->cfg.exporter == PP_EXPORTER_PYROSCOPE ? PP_TRANSPORT_PYROSCOPE_INGEST
								: PP_TRANSPORT_OTLP_HTTP;
	tc.endpoint = ag->cfg.endpoint;
	tc.endpoint_verbatim = ag->cfg.exporter == PP_EXPORTER_OTLP;
	tc.user_agent = "pebsprof/" PP_VERSION;
	tc.app_name =
	    pp_pyroscope_service_name(ag->cfg.service_name[0] ? ag->cfg.service_name : "pebsprof",
				      PP_SERVICE_CONFIGURED, app_name, sizeof(app_name));
	tc.queue_bytes = (size_t)ag->cfg.queue_bytes;
	tc.log = transport_log;
	tc.on_result = transport_result;
	tc.result_ctx = ag;
	/*
	 * The transport takes the headers as OTEL_EXPORTER_OTLP_HEADERS text; the configuration
	 * holds them decoded, so values are percent-encoded again (a ',' or '%' in a token must
	 * not change the list).
	 */
	for (size_t i = 0; i < ag->cfg.headers.n; i++)
		len += strlen(ag->cfg.headers.items[i].key) +
		       3 * strlen(ag->cfg.headers.items[i].value) + 2;
	if (len) {
		char *w;

		headers = calloc(1, len + 1);
		if (!headers)
			return -ENOMEM;
		w = headers;
		for (size_t i = 0; i < ag->cfg.headers.n; i++) {
			w += sprintf(w, "%s%s=", i ? "," : "", ag->cfg.headers.items[i].key);
			for (const unsigned char *v =
				 (const unsigned char *)ag->cfg.headers.items[i].value;
			     *v; v++) {
				if (*v == '%' || *v == ',' || *v <= ' ' || *v >= 0x7f)
					w += sprintf(w, "%%%02X", *v);
				else
					*w++ = (char)*v;
			}
		}
		tc.headers = headers;
	}
	ag->transport = pp_transport_new(&tc, err, errlen);
	free(headers);
	if (!ag->transport)
		return -EINVAL;
	if (pthread_create(&ag->sender, NULL, sender_main, ag)) {
		snprintf(err, errlen, "cannot start the sender thread");
		return -EAGAIN;
	}
	pthread_setname_np(ag->sender, "pp-sender"); /* top -H, perf: which thread */
	ag->sender_running = 1;
	return 0;
}

static int new_window(struct agent *ag, uint64_t start_unix_ns)
{
	struct pp_profile *p = pp_profile_new(&ag->desc);

	if (!p)
		return -ENOMEM;
	pp_profile_set_window(p, start_unix_ns, 0);
	/* Flushes the raw-stack table into the closing window first. */
	pp_session_set_profile(ag->session, p);
	pp_profile_free(ag->profile);
	ag->profile = p;
	return 0;
}

/* Keeps the newest `keep` files of one kind in the output directory. */
static void prune_files(const char *dir, const char *suffix, uint64_t keep)
{
	struct dirent **names = NULL;
	size_t slen = strlen(suffix);
	int n = scandir(dir, &names, NULL, alphasort), matching = 0;

	if (n < 0)
		return;
	for (int i = n - 1; i >= 0; i--) {
		size_t l = strlen(names[i]->d_name);

		if (strncmp(names[i]->d_name, "pebsprof-", 9) == 0 && l > slen &&
		    strcmp(names[i]->d_name + l - slen, suffix) == 0 && ++matching > (int)keep) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
			unlink(path);
		}
		free(names[i]);
	}
	free(names);
}

static struct pp_otlp_resource resource_of(struct agent *ag)
{
	struct pp_otlp_resource res = {
	    .service_name = ag->cfg.service_name[0] ? ag->cfg.service_name : NULL,
	    .host_name = ag->host,
	    .node_name = pp_run_config_node_name(&ag->cfg), /* k8s.node.name only when set */
	    .scope_version = PP_VERSION,
	    .extra_attrs = ag->attrs,
	    .n_extra = ag->nattrs,
	};

	return res;
}

/* The service name configured for every process: --service-name, else OTEL_RESOURCE_ATTRIBUTES. */
static const char *configured_service(const struct agent *ag)
{
	const char *v = NULL;

	if (ag->cfg.service_name[0])
		return ag->cfg.service_name;
	for (uint32_t i = 0; i < ag->nattrs; i++)
		if (strcmp(ag->attrs[i].key, "service.name") == 0)
			v = ag->attrs[i].value;
	return v;
}

/* Label names the backend would refuse past its limit: counted, and named once in the log. */
static void count_label_drops(struct agent *ag, const struct pp_label_budget *b)
{
	char names[512];

	if (!b->ndropped)
		return;
	ag->label_names_dropped += b->ndropped;
	if (ag->label_drop_said)
		return;
	ag->label_drop_said = 1;
	pp_label_budget_describe(b, names, sizeof(names));
	pp_info("profiles carry more label names than Pyroscope keeps (30 per series): %u left "
		"out, least useful first: %s",
		b->ndropped, names);
}

/*
 * Queues one request; the caller counts a failure. A full queue drops its oldest requests to
 * make room: each such drop is a lost window part, counted as a failed export (health) and
 * said, at once and then at most once a minute with the count since.
 */
static int queue_request(struct agent *ag, uint8_t *body, size_t len,
			 const struct pp_send_meta *meta)
{
	struct pp_transport_stats before, after;
	uint64_t dropped, now;
	int ret;

	pp_transport_stats(ag->transport, &before);
	ret = pp_transport_push(ag->transport, body, len, meta);
	pp_transport_stats(ag->transport, &after);
	if (ret)
		pp_warn("window %llu: a request of %zu bytes not queued for export: %s",
			(unsigned long long)meta->tag, len, strerror(-ret));
	dropped = after.queue.dropped_overflow - before.queue.dropped_overflow;
	if (!dropped)
		return ret;
	atomic_fetch_add(&ag->export_failures, dropped);
	atomic_fetch_add(&ag->failures_in_a_row, dropped);
	ag->queue_drops_unsaid += dropped;
	now = pp_clock_ns(CLOCK_MONOTONIC);
	if (!ag->queue_drop_said_ns || now - ag->queue_drop_said_ns >= 60 * NS_PER_S) {
		pp_warn("upload queue full (%llu bytes): %llu oldest requests dropped to make room "
			"(%llu in all); the backend takes less than the agent sends",
			(unsigned long long)after.queue.cap_bytes,
			(unsigned long long)ag->queue_drops_unsaid,
			(unsigned long long)after.queue.dropped_overflow);
		ag->queue_drops_unsaid = 0;
		ag->queue_drop_said_ns = now;
	}
	return ret;
}

/*
 * Queues an OTLP request, cut in halves first while it is over max-request-bytes (a
 * Collector answers 400 past 20 MiB). A request of one sample is sent as it is.
 */
static int queue_otlp(struct agent *ag, uint8_t *body, size_t len, const struct pp_send_meta *meta)
{
	uint8_t *a, *b;
	size_t la, lb;
	int ret, ret2;

	if (len <= ag->cfg.max_request_bytes)
		return queue_request(ag, body, len, meta);
	ret = pp_otlp_split_request(body, len, &a, &la, &b, &lb);
	if (ret == -E2BIG)
		return queue_request(ag, body, len, meta);
	free(body);
	if (ret) {
		pp_warn("window %llu: cannot cut a request of %zu bytes: %s",
			(unsigned long long)meta->tag, len, strerror(-ret));
		return ret;
	}
	ag->requests_cut++;
	ret = queue_otlp(ag, a, la, meta);
	ret2 = queue_otlp(ag, b, lb, meta);
	return ret ? ret : ret2;
}

/*
 * Sends a window to the network exporter in the parts the backend accepts (split.h): over
 * OTLP, usually one request; over the push, one request per service, named after it.
 */
static int send_window(struct agent *ag, const struct pp_profile *p,
		       const struct pp_otlp_resource *res)
{
	const struct pp_profile_desc *d = pp_profile_get_desc(p);
	struct pp_split_limits lim = {.max_samples = ag->cfg.max_profile_samples,
				      .max_profile_bytes = ag->cfg.max_profile_bytes,
				      .max_request_bytes =
					  pp_split_burst_budget(ag->cfg.max_burst_bytes)};
	bool push = ag->cfg.exporter == PP_EXPORTER_PYROSCOPE;
	struct pp_send_meta meta = {.kind = push ? PP_SEND_PYROSCOPE : PP_SEND_OTLP,
				    .tag = ag->window_seq};
	struct pp_label_budget budget;
	struct pp_split split;
	int ret, first_err = 0;

	if (push) {
		meta.from_s = (int64_t)(d->start_unix_ns / NS_PER_S);
		meta.until_s = (int64_t)((d->start_unix_ns + d->duration_ns) / NS_PER_S);
	}
	ret = pp_split_profile(p, push ? PP_SPLIT_BY_SERVICE : PP_SPLIT_BY_RESOURCE,
			       configured_service(ag), &lim, &split);
	if (ret) {
		pp_warn("window %llu not exported: cannot cut it for the backend's limits: %s",
			(unsigned long long)ag->window_seq, strerror(-ret));
		return ret;
	}
	if (split.cut || split.oversize)
		pp_debug("window %llu: %zu of %zu profiles cut into %zu requests; %zu samples "
			 "over max-profile-bytes alone",
			 (unsigned long long)ag->window_seq, split.cut, split.groups, split.nparts,
			 split.oversize);
	ag->profiles_cut += split.cut;
	ag->requests_packed += split.packed;
	ag->samples_oversize += split.oversize;
	if (push)
		pp_pprof_plan_labels(p, &budget);
	else
		pp_otlp_plan_labels(&p, 1, res, &budget);
	count_label_drops(ag, &budget);
	for (size_t i = 0; i < split.nparts; i++) {
		const struct pp_profile *part = split.parts[i].profile;
		uint8_t *body = NULL;
		size_t len = 0;

		if (push) {
			snprintf(meta.app_name, sizeof(meta.app_name), "%s",
				 split.parts[i].service);
			ret = 0;
			/* the event's profile, and off-CPU time as its own (Pyroscope's off_cpu) */
			if (pp_profile_total_count(part)) {
				ret = pp_pprof_encode(part, &body, &len);
				if (!ret)
					ret = queue_request(ag, body, len, &meta);
			}
			if (!ret && pp_profile_off_cpu_waits(part)) {
				body = NULL;
				ret = pp_pprof_encode_off_cpu(part, &body, &len);
				if (!ret)
					ret = queue_request(ag, body, len, &meta);
			}
		} else {
			ret = pp_otlp_encode(&part, 1, res, &body, &len);
			if (!ret)
				ret = queue_otlp(ag, body, len, &meta);
		}
		if (ret && !first_err) {
			first_err = ret;
			pp_warn("window %llu: part %zu of %zu not exported: %s",
				(unsigned long long)ag->window_seq, i + 1, split.nparts,
				strerror(-ret));
		}
	}
	pp_split_fini(&split);
	if (first_err) {
		atomic_fetch_add(&ag->export_failures, 1);
		atomic_fetch_add(&ag->failures_in_a_row, 1);
	}
	return first_err;
}

static int export_window(struct agent *ag, const struct pp_profile *p)
{
	const struct pp_profile *profiles[1] = {p};
	struct pp_otlp_resource res = resource_of(ag);
	const struct pp_profile_desc *d = pp_profile_get_desc(p);
	int ret;

	if (!pp_profile_sample_count(p))
		return 0;
	ag->window_seq++;
	if (ag->cfg.exporter == PP_EXPORTER_FILE) {
		struct pp_label_budget budget;
		char stamp[32], path[4096];
		time_t secs = (time_t)(d->start_unix_ns / NS_PER_S);
		struct tm tm;

		gmtime_r(&secs, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		snprintf(path, sizeof(path), "%s/pebsprof-%s.otlp.pb", ag->cfg.output_dir, stamp);
		pp_otlp_plan_labels(profiles, 1, &res, &budget);
		count_label_drops(ag, &budget);
		ret = pp_otlp_write_file(profiles, 1, &res, path);
		if (!ret) {
			snprintf(path, sizeof(path), "%s/pebsprof-%s.pb.gz", ag->cfg.output_dir,
				 stamp);
			ret = pp_pprof_write_file(p, path);
		}
		if (ret)
			pp_error("cannot write window %s to %s: %s", stamp, ag->cfg.output_dir,
				 strerror(-ret));
		prune_files(ag->cfg.output_dir, ".otlp.pb", ag->cfg.keep);
		prune_files(ag->cfg.output_dir, ".pb.gz", ag->cfg.keep);
		if (ret) {
			atomic_fetch_add(&ag->export_failures, 1);
			atomic_fetch_add(&ag->failures_in_a_row, 1);
		} else {
			atomic_store(&ag->failures_in_a_row, 0);
		}
		return ret;
	}
	return send_window(ag, p, &res);
}

/*
 * The share of the closing window's samples whose process's maps or binary could not be read: said
 * when it reaches PP_HEALTH_UNREADABLE_PCT (and /healthz says degraded), and when it
 * falls back under half of that.
 */
static void window_maps_share(struct agent *ag)
{
	struct pp_session_stats ss;
	uint64_t n, bad;
	uint32_t pct, was = ag->unreadable_pct;

	pp_session_get_stats(ag->session, &ss);
	n = ss.samples - ag->seen_samples;
	bad = ss.samples_unreadable - ag->seen_unreadable;
	ag->seen_samples = ss.samples;
	ag->seen_unreadable = ss.samples_unreadable;
	pct = n ? (uint32_t)(bad * 100 / n) : 0;
	ag->unreadable_pct = pct;
	if (pct >= PP_HEALTH_UNREADABLE_PCT && was < PP_HEALTH_UNREADABLE_PCT)
		pp_warn("%u%% of the window's samples come from processes whose maps or binaries "
			"cannot be read (EACCES): their user frames are bare; the agent needs "
			"CAP_SYS_PTRACE, and AppArmor must allow it (appArmorProfile: Unconfined)",
			pct);
	else if (pct < PP_HEALTH_UNREADABLE_PCT / 2 && was >= PP_HEALTH_UNREADABLE_PCT)
		pp_info("processes' maps and binaries are readable again (%u%% of the window's "
			"samples not)",
			pct);
}

/* Windows a stalled loop closes one by one; further behind, the wall clock jumped. */
#define MAX_WINDOWS_BEHIND 16

/* How long a window stays open after its end: two poll ticks, at most a fifth of it. */
static uint64_t grace_ns(uint64_t interval)
{
	uint64_t g = 2 * POLL_INTERVAL_MS * 1000000ull + 50 * 1000000ull;

	return g < interval / 5 ? g : interval / 5;
}

/*
 * Uploads of a fleet's windows would all start at the same aligned instant; each node waits
 * a random part of the next window (at most half of it, at most 5 s) before it sends.
 */
static uint64_t upload_jitter_ns(struct agent *ag)
{
	uint64_t span = ag->cfg.interval_ns / 2;

	if (span > 5 * NS_PER_S)
		span = 5 * NS_PER_S;
	ag->rng ^= ag->rng << 13;
	ag->rng ^= ag->rng >> 7;
	ag->rng ^= ag->rng << 17;
	return span ? ag->rng % span : 0;
}

static void export_pending(struct agent *ag)
{
	if (!ag->pending)
		return;
	export_window(ag, ag->pending);
	pp_profile_free(ag->pending);
	ag->pending = NULL;
	/* A window's profile and its encodings were just freed: give the pages back, so the
	 * agent's RSS follows what it holds rather than its largest window so far. */
	malloc_trim(0);
}

/*
 * Closes the window that ended at window_end: its samples (the session's, flushed by
 * new_window), its length, and the next window from window_end, to next_end (0: the stop),
 * with the samples held for it. The closed one is written now (file exporter) or waits its
 * upload jitter. 0 or -ENOMEM, logged.
 */
static int close_window(struct agent *ag, uint64_t window_end, uint64_t next_end, uint64_t now)
{
	struct pp_profile *closing = ag->profile;
	uint64_t start = pp_profile_get_desc(closing)->start_unix_ns;

	ag->profile = NULL;
	ag->windows_closed++;
	window_maps_share(ag);
	pp_profile_set_window(closing, start, window_end - start);
	/* new_window flushes the session into `closing` before switching. */
	if (new_window(ag, window_end)) {
		pp_profile_free(closing);
		pp_error("out of memory");
		return -ENOMEM;
	}
	ag->strings_cleaned += pp_profile_strings_cleaned(closing);
	pp_session_release_held(ag->session,
				next_end ? next_end - (uint64_t)ag->mono_to_wall_ns : 0);
	export_pending(ag); /* the previous one, if still waiting */
	if (ag->cfg.exporter == PP_EXPORTER_FILE) {
		export_window(ag, closing);
		pp_profile_free(closing);
	} else {
		ag->pending = closing;
		ag->pending_due_ns = now + upload_jitter_ns(ag);
	}
	return 0;
}

/* Stops the sender and gives the queue until the flush deadline to drain. */
static void drain_export(struct agent *ag)
{
	uint64_t deadline_ms, now_ms;

	if (!ag->transport)
		return;
	if (ag->sender_running) {
		atomic_store(&ag->sender_stop, 1);
		pp_transport_wake(ag->transport);
		pthread_join(ag->sender, NULL);
		ag->sender_running = 0;
	}
	now_ms = pp_clock_ns(CLOCK_MONOTONIC) / 1000000;
	deadline_ms = now_ms + ag->cfg.flush_timeout_ns / 1000000;
	for (;;) {
		struct pp_transport_stats st;
		uint64_t next_due = UINT64_MAX;

		pp_transport_poll(ag->transport, &next_due);
		pp_transport_stats(ag->transport, &st);
		now_ms = pp_clock_ns(CLOCK_MONOTONIC) / 1000000;
		if (!st.queue.items && next_due == UINT64_MAX)
			break;
		if (now_ms >= deadline_ms) {
			pp_warn("flush deadline reached: %llu queued windows dropped",
				(unsigned long long)st.queue.items);
			break;
		}
		if (next_due != UINT64_MAX && next_due > now_ms)
			pp_transport_wait(ag->transport,
					  (next_due < deadline_ms ? next_due : deadline_ms) -
					      now_ms);
	}
	pp_transport_flush(ag->transport);
}

/* One line at exit with what was sampled, shipped and lost, for logs and for tests. */
static void print_summary(struct agent *ag)
{
	struct pp_session_stats ss;
	uint64_t counters[PP_CNT__MAX] = {0};

	pp_session_get_stats(ag->session, &ss);
	pp_shim_read_counters(ag->smp.shim, counters);
	if (ag->transport) {
		struct pp_transport_stats ts;

		pp_transport_stats(ag->transport, &ts);
		pp_info(
		    "stopped: %llu windows, %llu samples (lost in kernel %llu, late %llu); export: "
		    "%llu delivered, %llu retries, dropped %llu (4xx %llu, 5xx %llu, gave up %llu, "
		    "queue overflow %llu, at shutdown %llu), %llu profiles rejected by the backend",
		    (unsigned long long)ag->window_seq, (unsigned long long)ss.samples,
		    (unsigned long long)(counters[PP_CNT_RB_FULL] + counters[PP_CNT_SCRATCH_MISS]),
		    (unsigned long long)ss.samples_late, (unsigned long long)ts.sent,
		    (unsigned long long)ts.retried,
		    (unsigned long long)(ts.dropped_4xx + ts.dropped_5xx + ts.dropped_give_up +
					 ts.dropped_other + ts.dropped_shutdown +
					 ts.queue.dropped_overflow),
		    (unsigned long long)ts.dropped_4xx, (unsigned long long)ts.dropped_5xx,
		    (unsigned long long)ts.dropped_give_up,
		    (unsigned long long)ts.queue.dropped_overflow,
		    (unsigned long long)ts.dropped_shutdown,
		    (unsigned long long)ts.rejected_profiles);
		if (ts.split_needed)
			pp_info("export: %llu requests too large for the server (HTTP 413 or 400): "
				"%llu split and resent, %llu dropped",
				(unsigned long long)ts.split_needed,
				(unsigned long long)atomic_load(&ag->split_resent),
				(unsigned long long)atomic_load(&ag->split_dropped));
		if (ag->profiles_cut || ag->requests_cut || ag->requests_packed)
			pp_info(
			    "export: cut before sending for the backend's limits: %llu profiles "
			    "(max-profile-samples, max-profile-bytes), %llu requests "
			    "(max-request-bytes); %llu more requests for the burst "
			    "(max-burst-bytes)",
			    (unsigned long long)ag->profiles_cut,
			    (unsigned long long)ag->requests_cut,
			    (unsigned long long)ag->requests_packed);
	} else {
		pp_info(
		    "stopped: %llu windows written to %s, %llu samples (lost in kernel %llu, "
		    "late %llu)",
		    (unsigned long long)ag->window_seq, ag->cfg.output_dir,
		    (unsigned long long)ss.samples,
		    (unsigned long long)(counters[PP_CNT_RB_FULL] + counters[PP_CNT_SCRATCH_MISS]),
		    (unsigned long long)ss.samples_late);
	}
	if (ag->label_names_dropped)
		pp_info("export: %llu label names left out of the windows (Pyroscope keeps 30 per "
			"series)",
			(unsigned long long)ag->label_names_dropped);
}

/*
 * Once per poll tick (at most every POLL_INTERVAL_MS): the counters the endpoint serves and
 * the times its rules look at, handed over in one copy.
 */
static void health_tick(struct agent *ag, int stopping)
{
	struct pp_health_snapshot snap = {0};
	struct pp_session_stats ss;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC), kernel;

	if (!ag->health || (!stopping && now - ag->health_tick_ns < POLL_INTERVAL_MS * 1000000ull))
		return;
	ag->health_tick_ns = now;
	pp_session_get_stats(ag->session, &ss);
	snap.process_cache_entries = (int64_t)ss.processes_cached;
	snap.symbol_cache_files = (int64_t)ss.symbol_files_cached;
	snap.process_cache_bytes = ss.process_cache_bytes;
	snap.symbol_cache_bytes = ss.symbol_cache_bytes;
	snap.symbol_store_on = ss.symbol_store_on;
	snap.symbol_store_hits = ss.symbol_store.hits;
	snap.symbol_store_stored = ss.symbol_store.stored;
	snap.symbol_store_unsettled = ss.symbol_store.unsettled;
	snap.symbol_store_refused = ss.symbol_store.refused;
	snap.symbol_store_trimmed = ss.symbol_store.trimmed;
	snap.symbol_store_failed = ss.symbol_store.failed;
	snap.symbol_store_bytes = ss.symbol_store.bytes;
	snap.frame_cache_bytes = ss.frame_cache_bytes;
	snap.raw_stack_bytes = ss.raw_stack_bytes;
	snap.mem_obj_cache_bytes = ss.mem_obj_cache_bytes;
	snap.symbol_evictions = ss.symbol_evictions;
	snap.symbol_too_big = ss.symbol_too_big;
	snap.symbol_refused_sparse = ss.symbol_refused;
	snap.symbol_not_mapped_file = ss.symbol_not_mapped_file;
	snap.symbol_unreachable = ss.symbol_open_failed;
	snap.frames_awaited = ss.frames_pending;
	snap.frames_awaited_finished = ss.frames_resolved;
	snap.symbol_tables_at_once = ss.symbol_tables_at_once;
	snap.names_memoized = ss.names_memoized;
	snap.strings_cleaned = ag->strings_cleaned;
	pp_shim_read_counters(ag->smp.shim, snap.shim);
	if (ag->smp.unwinder) {
		struct pp_unwinder_stats us;

		pp_unwinder_get_stats(ag->smp.unwinder, &us);
		snap.unwind_tables_built = us.tables_built;
		snap.unwind_tables_rebuilt = us.tables_rebuilt;
		snap.unwind_partial_tables = us.tables_partial;
		snap.unwind_partial_promoted = us.partial_promoted;
		snap.unwind_partial_fdes = us.partial_fdes;
		snap.unwind_partial_writes = us.partial_writes;
		snap.unwind_cache_on = us.cache_on;
		snap.unwind_tables_from_cache = us.tables_from_cache;
		snap.unwind_cache_stored = us.cache_stored;
		snap.unwind_cache_refused = us.cache_refused;
		snap.unwind_cache_trimmed = us.cache_trimmed;
		snap.unwind_cache_failed = us.cache_failed;
		snap.unwind_cache_bytes = us.cache_bytes;
		snap.unwind_maps_reads = us.maps_reads;
		snap.unwind_procs_from_events = us.procs_from_events;
		snap.unwind_tables_shared = us.tables_shared;
		snap.unwind_tables_none = us.tables_none;
		snap.unwind_tables_refused = us.tables_refused;
		snap.unwind_tables_evicted = us.tables_evicted;
		snap.unwind_tables_no_room = us.tables_no_room;
		snap.unwind_rows_used = us.rows_used;
		snap.unwind_rows_total = us.rows_total;
		snap.unwind_rules_used = us.rules_used;
		snap.unwind_tables_too_big = us.tables_too_big;
		snap.unwind_procs_live = us.procs_live;
		snap.unwind_procs_no_room = us.procs_no_room;
	}
	/* Progress: the BPF program ran, or records came out of the ring buffer. */
	kernel = snap.shim[PP_CNT_SAMPLES] + ss.decode.samples + ss.decode.tasks;
	if (kernel != ag->seen_kernel || !ag->progress_ns) {
		ag->seen_kernel = kernel;
		ag->progress_ns = now;
	}
	snap.updated_ns = now;
	snap.progress_ns = ag->progress_ns;
	snap.stopping = stopping;
	snap.samples = ss.samples;
	snap.samples_late = ss.samples_late;
	snap.samples_unreadable = ss.samples_unreadable;
	snap.unreadable_pct = ag->unreadable_pct;
	snap.decode = ss.decode;
	snap.samples_no_process = ss.samples_no_process;
	snap.samples_of_replaced_images = ss.samples_of_replaced_images;
	snap.samples_of_images_not_kept = ss.samples_of_images_not_kept;
	snap.copies_whole = ss.copies_whole;
	snap.copies_short_copy_ended = ss.copies_short_copy_ended;
	snap.copies_short_no_cfi = ss.copies_short_no_cfi;
	snap.copies_short_other = ss.copies_short_other;
	snap.copies_no_tables = ss.copies_no_tables;
	snap.copies_of_replaced_images = ss.copies_of_replaced_images;
	snap.copies_refused = ss.copies_refused;
	snap.process_images_reported = ss.process_images_reported;
	snap.process_reads = ss.process_reads;
	snap.process_map_rereads = ss.process_map_rereads;
	snap.sideband_records = ss.sideband_records;
	snap.sideband_lost = ss.sideband_lost;
	snap.add_errors = ss.add_errors;
	snap.frames = ss.frames;
	snap.frames_unmapped = ss.frames_unmapped;
	snap.frames_no_symbol = ss.frames_no_symbol;
	snap.frames_no_file = ss.frames_no_file;
	for (int i = 0; i < PP_NAMED_SOURCES && i < PP_HEALTH_NAME_SOURCES; i++) {
		snap.frames_named[i] = ss.named[i];
		snap.frames_named_source[i] = pp_frame_source_name((enum pp_frame_source)i);
	}
	snap.frames_unnamed = ss.unnamed;
	/* the search runs at the first kernel access sampled with an exact IP: its state is
	 * logged as it changes, until it ended (while debuginfod fetches the image, once) */
	if (ss.mem_samples && (!ag->kernel_image_said || ag->kernel_image_said == -EINPROGRESS)) {
		char why[768];
		int state = pp_session_kernel_image(ag->session, why, sizeof(why));

		if (state != ag->kernel_image_said) {
			if (state == -EINPROGRESS)
				pp_info("kernel data types: not yet: %s", why);
			else if (state > 0)
				pp_info("kernel data types from %s", why);
			else if (state < 0)
				pp_warn("kernel data types: none: %s", why);
			ag->kernel_image_said = state;
		}
	}
	if (ss.mem_samples) {
		int n = 0;

		snap.data_types_result[n] = "typed";
		snap.data_types[n++] = ss.data_typed;
		snap.data_types_result[n] = "waiting";
		snap.data_types[n++] = ss.data_type_pending;
		for (int m = 1; m < PP_DT_MISS__COUNT && n < PP_HEALTH_DATA_TYPE_RESULTS; m++) {
			snap.data_types_result[n] =
			    pp_data_type_miss_name((enum pp_data_type_miss)m);
			snap.data_types[n++] = ss.data_untyped[m];
		}
	}
	snap.perf_map_refused = ss.perf_map_refused;
	snap.perf_map_bad_lines = ss.perf_map_bad_lines;
	snap.frames_not_code = ss.samples_walk_ended;
	snap.windows_closed = ag->windows_closed;
	snap.windows_exported = ag->window_seq;
	snap.export_failures = atomic_load(&ag->export_failures);
	snap.failures_in_a_row = (uint32_t)atomic_load(&ag->failures_in_a_row);
	snap.profiles_cut = ag->profiles_cut;
	snap.requests_cut = ag->requests_cut;
	snap.requests_packed = ag->requests_packed;
	snap.samples_oversize = ag->samples_oversize;
	snap.label_names_dropped = ag->label_names_dropped;
	if (ag->transport) {
		const struct pp_transport_stats *t = &snap.transport;
		uint64_t failed;
		int sent;

		pp_transport_stats(ag->transport, &snap.transport);
		snap.has_transport = 1;
		snap.split_resent = atomic_load(&ag->split_resent);
		snap.split_dropped = atomic_load(&ag->split_dropped);
		/*
		 * Uploads are failing from the first failed attempt (a retry scheduled, or a
		 * drop) until a delivery; when both happened since the last tick, the last
		 * resolved request decides.
		 */
		failed = t->retried + t->dropped_4xx + t->dropped_5xx + t->dropped_give_up +
			 t->dropped_other;
		sent = t->sent != ag->seen_sent;
		if (sent && (failed == ag->seen_failed || !atomic_load(&ag->export_failing)))
			ag->failing_since_ns = 0;
		else if (failed != ag->seen_failed && !ag->failing_since_ns)
			ag->failing_since_ns = now;
		ag->seen_sent = t->sent;
		ag->seen_failed = failed;
		snap.export_failing_since_ns = ag->failing_since_ns;
	}
	pp_health_server_update(ag->health, &snap);
}

/*
 * Room for the endpoint's connections beside the agent's own files: the soft descriptor limit
 * up to PP_HEALTH_MAX_CONNS * 2 where the hard limit allows (many hosts start at 1024).
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = PP_HEALTH_MAX_CONNS * 2;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* The listener starts before sampling, so a bad address or a busy port fails at once. */
static int start_health(struct agent *ag, char *err, size_t errlen)
{
	struct pp_transport_config tc;
	struct pp_health_limits lim = {
	    .stall_ns = ag->cfg.stall_timeout_ns,
	    .failed_windows = PP_HEALTH_FAILED_WINDOWS,
	};

	if (!ag->cfg.listen[0])
		return 0;
	pp_transport_config_init(&tc); /* the retry budget setup_export leaves as it is */
	if (ag->cfg.exporter != PP_EXPORTER_FILE && tc.max_elapsed_ms)
		lim.export_fail_ns = tc.max_elapsed_ms * 1000000ull + ag->cfg.interval_ns;
	if (ag->cfg.exporter != PP_EXPORTER_FILE) {
		lim.queue_age_ns = PP_HEALTH_QUEUE_AGE_WINDOWS * ag->cfg.interval_ns;
		if (lim.queue_age_ns < 30 * NS_PER_S)
			lim.queue_age_ns = 30 * NS_PER_S;
	}
	raise_fd_limit();
	ag->health = pp_health_server_new(ag->cfg.listen, &lim, err, errlen);
	if (!ag->health)
		return -errno;
	pp_info("serving /healthz and /metrics on %s (port %u)", ag->cfg.listen,
		(unsigned)pp_health_server_port(ag->health));
	return 0;
}

static void agent_fini(struct agent *ag)
{
	pp_health_server_free(ag->health);
	if (ag->sender_running) {
		atomic_store(&ag->sender_stop, 1);
		pp_transport_wake(ag->transport);
		pthread_join(ag->sender, NULL);
	}
	pp_transport_free(ag->transport);
	pp_session_free(ag->session);
	pp_symbolizer_fini(&ag->sym);
	pp_containers_close(&ag->containers);
	pp_profile_free(ag->pending);
	pp_profile_free(ag->profile);
	pp_sampler_close(&ag->smp);
	free(ag->attrs);
	pp_run_config_fini(&ag->cfg);
}

static int open_containers(struct agent *ag, char *err, size_t errlen)
{
	const struct pp_run_config *c = &ag->cfg;
	struct pp_containers_opts o = {
	    .proc_root = c->proc_root,
	    .cgroup_root = c->cgroup_root,
	    .k8s = pp_run_config_k8s_opts(c),
	};

	return pp_containers_open(&o, &ag->containers, err, errlen);
}

static struct pp_containers_filter filter_of(const struct agent *ag)
{
	return (struct pp_containers_filter){.cgroups = ag->cfg.cgroup,
					     .container_ids = ag->cfg.container_id,
					     .namespaces = ag->cfg.namespace_};
}

/* What the session leaves out of samples for --sample-labels. */
static unsigned session_drop(int sample_labels)
{
	return (sample_labels & PP_SAMPLE_LABEL_THREAD ? 0 : PP_SESSION_DROP_THREAD) |
	       (sample_labels & PP_SAMPLE_LABEL_PID ? 0 : PP_SESSION_DROP_PID) |
	       (sample_labels & PP_SAMPLE_LABEL_MEMORY ? 0 : PP_SESSION_DROP_MEMORY_DETAIL);
}

static int start_sampling(struct agent *ag)
{
	struct pp_sampler_opts so = {
	    .sysfs_root = ag->cfg.sysfs_root[0] ? ag->cfg.sysfs_root : NULL,
	    .proc_root = ag->cfg.proc_root,
	    .req = {.spec = ag->cfg.event,
		    .freq_hz = ag->cfg.freq_hz,
		    .period = ag->cfg.period,
		    .ldlat = (uint32_t)ag->cfg.ldlat,
		    .stack_depth = (uint32_t)ag->cfg.stack_depth,
		    .want_kstack = 1,
		    .want_ustack = 1},
	    .cgroup2_root = ag->cfg.cgroup_root[0] ? ag->cfg.cgroup_root : NULL,
	    .ustack_walk = (uint32_t)ag->cfg.user_unwind,
	    .unwind_table_bytes = ag->cfg.unwind_table_bytes,
	    .unwind_table_cache = ag->cfg.unwind_table_cache,
	    .unwind_table_cache_bytes = ag->cfg.unwind_table_cache_bytes,
	    .unwind_partial_fdes = ag->cfg.unwind_partial_fdes,
	    .off_cpu_every = ag->cfg.off_cpu ? (uint32_t)ag->cfg.off_cpu_every : 0,
	    .off_cpu_min_ns = ag->cfg.off_cpu_threshold_ns,
	    .off_cpu_stacks = (enum pp_shim_off_cpu_stacks)ag->cfg.off_cpu_stacks,
	};
	struct pp_session_opts sess = {
	    .proc_root = ag->cfg.proc_root,
	    .raw_stack_entries = 1 << 16,
	    .per_cpu = !!(ag->cfg.sample_labels & PP_SAMPLE_LABEL_CPU),
	    .drop = session_drop(ag->cfg.sample_labels),
	    .max_symbol_bytes = (size_t)ag->cfg.symbol_cache_bytes,
	    .symbol_table_cache = pp_symbol_store_dir_of(ag->cfg.symbol_table_cache),
	    .symbol_table_cache_bytes = ag->cfg.symbol_table_cache_bytes};
	struct pp_containers_filter wanted = filter_of(ag);
	char err[512];
	int ret;

	so.filter_cgroups = pp_containers_filter_wanted(&wanted);
	ret = pp_sampler_open(&so, &ag->smp);
	if (ret != PP_EXIT_OK)
		return ret;
	ret = open_containers(ag, err, sizeof(err));
	if (ret) {
		pp_error("%s", err);
		return PP_EXIT_RUNTIME;
	}
	sess.containers = ag->containers.meta;
	if (so.filter_cgroups) {
		struct pp_containers_filter f = filter_of(ag);

		ret =
		    pp_containers_filter_apply(&ag->containers, &f, ag->smp.shim, err, sizeof(err));
		if (ret) {
			pp_error("%s", err);
			return ret == -EINVAL ? PP_EXIT_USAGE : PP_EXIT_RUNTIME;
		}
	}
	for (size_t i = 0; i < ag->smp.events->nr_events; i++)
		pp_info("%s", ag->smp.events->events[i].why);
	pp_sampler_profile_desc(&ag->smp, &ag->desc);
	pp_sampler_session_opts(&ag->smp, &sess);
	pp_symbolizer_session_opts(&ag->sym, ag->cfg.proc_root, ag->cfg.sysfs_root, &sess);
	ag->mono_to_wall_ns =
	    sess.mono_to_wall_ns; /* the records' clock, as the session reads it */
	pp_info("shim: %s variant, loaded in %.0f ms, %u instructions verified (0: kernel before "
		"5.16)",
		pp_shim_variant_name(pp_shim_loaded_variant(ag->smp.shim)),
		(double)pp_shim_load_ns(ag->smp.shim) / 1e6, pp_shim_verified_insns(ag->smp.shim));
	ag->session = pp_session_new(&sess, NULL);
	if (!ag->session || new_window(ag, pp_clock_ns(CLOCK_REALTIME))) {
		pp_error("out of memory");
		return PP_EXIT_RUNTIME;
	}
	return pp_sampler_attach(&ag->smp);
}

static int resource_attributes(struct agent *ag)
{
	const struct pp_kv_list *l = &ag->cfg.resource_attributes;

	if (!l->n)
		return 0;
	ag->attrs = calloc(l->n, sizeof(*ag->attrs));
	if (!ag->attrs)
		return -ENOMEM;
	for (size_t i = 0; i < l->n && i < PP_OTLP_MAX_RESOURCE_ATTRS; i++) {
		ag->attrs[ag->nattrs].key = l->items[i].key;
		ag->attrs[ag->nattrs++].value = l->items[i].value;
	}
	return 0;
}

int pp_cmd_run(int argc, char **argv)
{
	struct agent ag = {0};
	struct pp_config_errors errs = {0};
	char err[1024] = "";
	uint64_t interval, window_end, next_end, grace_until = 0, stop_ns;
	int status, ret;

	ret = pp_run_config_load(argc, argv, environ, &ag.cfg, &errs);
	if (ret) {
		pp_config_errors_print(&errs, "pebsprof run: ", stderr);
		pp_run_config_fini(&ag.cfg);
		return PP_EXIT_USAGE;
	}
	if (ag.cfg.help) {
		pp_run_config_usage(stdout);
		pp_run_config_fini(&ag.cfg);
		return PP_EXIT_OK;
	}
	if (ag.cfg.dry_run) {
		pp_run_config_print(&ag.cfg, stdout);
		pp_run_config_fini(&ag.cfg);
		return PP_EXIT_OK;
	}
	if (ag.cfg.verbose)
		pp_log_set_level(PP_LOG_DEBUG);
	pp_log_hook_libbpf();
	pp_cli_tune_malloc();
	/* host.name: the node's name, not the pod's (the agent's own UTS namespace) */
	if (ag.cfg.origin[PP_CFG_NODE_NAME].src != PP_SRC_DEFAULT && ag.cfg.node_name[0])
		snprintf(ag.host, sizeof(ag.host), "%s", ag.cfg.node_name);
	else
		pp_host_name(ag.cfg.proc_root, ag.host, sizeof(ag.host));
	if (resource_attributes(&ag)) {
		pp_error("out of memory");
		agent_fini(&ag);
		return PP_EXIT_RUNTIME;
	}
	/* before any other thread: debuginfod takes its settings from the environment */
	ret = pp_symbolizer_init(&ag.sym, &ag.cfg);
	if (ret) {
		agent_fini(&ag);
		return ret == -EINVAL ? PP_EXIT_USAGE : PP_EXIT_RUNTIME;
	}

	ret = start_health(&ag, err, sizeof(err));
	if (ret) {
		pp_error("%s", err);
		status = ret == -EINVAL ? PP_EXIT_USAGE : PP_EXIT_RUNTIME; /* bad address: 2 */
		goto out;
	}
	status = start_sampling(&ag);
	if (status != PP_EXIT_OK)
		goto out;
	if (setup_export(&ag, err, sizeof(err))) {
		pp_error("%s", err);
		status = PP_EXIT_USAGE;
		goto out;
	}
	pp_info("sampling; a window every %llu s goes to %s",
		(unsigned long long)(ag.cfg.interval_ns / NS_PER_S),
		ag.cfg.exporter == PP_EXPORTER_FILE ? ag.cfg.output_dir : ag.cfg.endpoint);

	signal(SIGINT, on_stop_signal);
	signal(SIGTERM, on_stop_signal);
	signal(SIGPIPE, SIG_IGN);
	interval = ag.cfg.interval_ns;
	ag.rng = pp_clock_ns(CLOCK_REALTIME) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	/*
	 * Windows are aligned to multiples of the interval and tile time without gaps. A record
	 * taken at or after the window's end is held for the next one whenever it is read: one
	 * poll drains what arrives while it runs, so a poll begun before the end reads records
	 * taken after it.
	 */
	/*
	 * The first window ends at the boundary after it began, before the events were attached:
	 * where attaching took past that boundary (a busy machine), it is closed at once rather
	 * than stretched to the next one.
	 */
	window_end = (pp_profile_get_desc(ag.profile)->start_unix_ns / interval + 1) * interval;
	pp_session_hold_from(ag.session, window_end - (uint64_t)ag.mono_to_wall_ns);
	while (!stop_requested) {
		uint64_t now = pp_clock_ns(CLOCK_REALTIME);
		int wait_ms = pp_shim_poll_interval_ms(ag.smp.shim);

		/*
		 * Wake at the window's end, not up to a poll interval after it: the grace (and a
		 * SIGTERM in it) counts from there; at the grace's end, at an upload's time, and
		 * often enough that /healthz never sees the loop stalled.
		 */
		wait_ms = pp_poll_wait_until(wait_ms, now, grace_until ? grace_until : window_end);
		if (ag.pending)
			wait_ms = pp_poll_wait_until(wait_ms, now, ag.pending_due_ns);
		if (ag.cfg.stall_timeout_ns && wait_ms * 1000000ull > ag.cfg.stall_timeout_ns / 4)
			wait_ms = (int)(ag.cfg.stall_timeout_ns / 4 / 1000000);
		ret = pp_shim_poll(ag.smp.shim, wait_ms, pp_session_record_cb, ag.session);
		pp_session_read_sideband(ag.session);
		if (ret < 0 && ret != -EINTR) {
			pp_error("reading the BPF ring buffer failed: %s", strerror(-ret));
			status = PP_EXIT_RUNTIME;
			goto out;
		}
		health_tick(&ag, 0);
		pp_containers_filter_refresh(&ag.containers, ag.smp.shim);
		now = pp_clock_ns(CLOCK_REALTIME);
		if (ag.pending && now >= ag.pending_due_ns)
			export_pending(&ag);
		if (now < window_end)
			continue;
		/*
		 * The window's grace: records in flight at its end (taken, not yet in a ring)
		 * are read within a prompt poll, so for a short while after its end the window
		 * stays open for the samples taken in it; the rings are drained at the grace's end.
		 * A loop that wakes past the grace (a busy machine stalled it) closes it at once.
		 */
		if (!grace_until)
			grace_until = window_end + grace_ns(interval);
		if (now < grace_until)
			continue;
		grace_until = 0;
		while (pp_shim_poll(ag.smp.shim, 0, pp_session_record_cb, ag.session) > 0)
			;
		/*
		 * A loop that stalled past the next window's end too closes that one on its next
		 * turn: every window is one interval. Only a jump of the wall clock (set forward)
		 * skips to the current boundary, rather than ship hundreds of empty windows; the
		 * window then open is the long one.
		 */
		next_end = window_end + interval;
		if (next_end + MAX_WINDOWS_BEHIND * interval <= now)
			next_end = (now / interval + 1) * interval;
		if (close_window(&ag, window_end, next_end, now)) {
			status = PP_EXIT_RUNTIME;
			goto out;
		}
		window_end = next_end;
	}

	/* SIGTERM/SIGINT: close the partial window, ship it and the queue, exit 0. */
	health_tick(&ag, 1);
	pp_shim_detach_all(ag.smp.shim);
	while (pp_shim_poll(ag.smp.shim, 0, pp_session_record_cb, ag.session) > 0)
		;
	/*
	 * Stopped in a window's grace, or past its end by now (the last records read and the
	 * programs detached on a busy machine can take a boundary's worth of time): that window
	 * ends where it ends, the held samples start the partial one. Before its end: the partial
	 * window ends now, and holds them.
	 */
	stop_ns = pp_clock_ns(CLOCK_REALTIME);
	if (grace_until || stop_ns >= window_end) {
		int behind = 0;

		/* each window the stop came after, then the partial one */
		for (;;) {
			next_end = window_end + interval;
			if (stop_ns < next_end || ++behind >= MAX_WINDOWS_BEHIND)
				next_end = 0;
			if (close_window(&ag, window_end, next_end, stop_ns)) {
				status = PP_EXIT_RUNTIME;
				goto out;
			}
			if (!next_end)
				break;
			window_end = next_end;
		}
	} else {
		pp_session_release_held(ag.session, 0);
	}
	pp_session_flush(ag.session);
	export_pending(&ag);
	{
		uint64_t start = pp_profile_get_desc(ag.profile)->start_unix_ns;

		/* it ended at the stop, not after the pending window's upload (seconds at worst) */
		pp_profile_set_window(ag.profile, start, stop_ns > start ? stop_ns - start : 0);
		export_window(&ag, ag.profile);
	}
	drain_export(&ag);
	print_summary(&ag);
	status = PP_EXIT_OK;
out:
	agent_fini(&ag);
	return status;
}

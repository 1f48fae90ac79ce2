/*
 * Configuration of `pebsprof run`: storing a value for a key from any source, the whole load
 * (defaults < config file < environment < flags), and what other parts are built from it.
 * The option table is config_table.c; values and the rules across keys config_check.c; the
 * file config_file.c; the environment config_env.c; --dry-run and the usage config_print.c.
 */
#define _GNU_SOURCE /* strndup */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <pebsprof/record.h>
#include <pebsprof/text.h>

#include "cli_util.h"
#include "config_internal.h"
#include "base/log.h"
#include "sampling/events.h"
#include "sampling/shim_loader.h"
#include "session.h"
#include "symbolize/debug_file.h"
#include "symbolize/debuginfod_fetch.h"

/* kernel-image debuginfod: a request's limit in all, for a vmlinux of hundreds of MiB */
#define KERNEL_IMAGE_MAX_TIME_S 900u

/* ---- errors ---------------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) void pp_cfg_err_add(struct pp_config_errors *e,
							  const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	if (e->n >= PP_CONFIG_MAX_ERRORS) {
		e->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(e->msg[e->n], PP_CONFIG_ERROR_LEN, fmt, ap);
	va_end(ap);
	e->n++;
}

__attribute__((format(printf, 3, 4))) int pp_cfg_set_err(char *err, size_t errlen, const char *fmt,
							 ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

void pp_config_errors_print(const struct pp_config_errors *e, const char *prefix, FILE *f)
{
	size_t pl = strlen(prefix);
	/* "pebsprof run" and "pebsprof run: " both read as "pebsprof run: message" */
	const char *sep = pl && (prefix[pl - 1] == ':' ||
				 (pl > 1 && prefix[pl - 2] == ':' && prefix[pl - 1] == ' '))
			      ? (prefix[pl - 1] == ':' ? " " : "")
			      : ": ";

	for (size_t i = 0; i < e->n; i++)
		fprintf(f, "%s%s%s\n", prefix, sep, e->msg[i]);
	if (e->dropped)
		fprintf(f, "%s%s... and %zu more errors\n", prefix, sep, e->dropped);
}

/* "a, b, c": the names an enum or set key takes, for its error message. */
static const char *names_list(const char *const *names, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int i = 0; names[i]; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? ", " : "", names[i]);
	return buf;
}

/*
 * Parses s (NUL-terminated, already checked for embedded NULs) as key k and stores it. On a
 * bad value returns -EINVAL with the reason in err and leaves the field unchanged.
 */
static int store(struct pp_run_config *c, int k, const char *s, char *err, size_t errlen)
{
	const struct option_def *o = &pp_cfg_table[k];
	size_t len = strlen(s);
	char why[PP_CONFIG_ERROR_LEN / 2], list[128];
	uint64_t v;
	int ret, b;

	why[0] = '\0';
	switch (o->type) {
	case T_PATH:
		if (!len)
			return pp_cfg_set_err(err, errlen, "an empty path");
		/* fall through */
	case T_STR:
	case T_EVENT:
	case T_URL:
	case T_LISTEN: {
		char *copy;

		if (o->type == T_EVENT) {
			struct pp_event_spec spec;

			if (pp_event_spec_parse(s, len, &spec, why, sizeof(why)))
				return pp_cfg_set_err(err, errlen, "bad event '%.*s': %s", ECHO_LEN,
						      s, why);
		} else if (o->type == T_URL && len && pp_url_check(s, len, why, sizeof(why))) {
			char red[ECHO_LEN + 16];

			pp_cfg_url_redact(s, red, sizeof(red));
			return pp_cfg_set_err(err, errlen, "bad URL '%s': %s", red, why);
		} else if (o->type == T_LISTEN && pp_listen_check(s, len, why, sizeof(why))) {
			return pp_cfg_set_err(err, errlen, "bad address '%.*s': %s", ECHO_LEN, s,
					      why);
		}
		copy = strdup(s);
		if (!copy)
			return -ENOMEM;
		free(*(char **)pp_cfg_field(c, k));
		*(char **)pp_cfg_field(c, k) = copy;
		return 0;
	}
	case T_KV: {
		struct pp_kv_list l;

		ret = pp_kv_list_parse(s, len, k == PP_CFG_HEADERS, &l, why, sizeof(why));
		if (ret == -EINVAL)
			return pp_cfg_set_err(err, errlen, "bad %s syntax: %s",
					      k == PP_CFG_HEADERS ? "header" : "attribute", why);
		if (ret)
			return ret;
		if (k == PP_CFG_RESOURCE_ATTRIBUTES &&
		    pp_resource_attributes_check(&l, why, sizeof(why))) {
			pp_kv_list_free(&l);
			return pp_cfg_set_err(err, errlen, "%s", why);
		}
		pp_kv_list_free(pp_cfg_field(c, k));
		*(struct pp_kv_list *)pp_cfg_field(c, k) = l;
		return 0;
	}
	case T_U64:
		ret = pp_parse_u64(s, o->min, o->max, &v);
		if (ret)
			return pp_cfg_set_err(
			    err, errlen, "'%.*s' is not a whole number in %llu..%llu", ECHO_LEN, s,
			    (unsigned long long)o->min, (unsigned long long)o->max);
		*(uint64_t *)pp_cfg_field(c, k) = v;
		return 0;
	case T_SECS:
		ret = pp_parse_seconds(s, &v);
		if (ret || v < o->min || v > o->max)
			return pp_cfg_set_err(err, errlen,
					      "'%.*s' is not a duration in seconds from %g to %llu "
					      "(e.g. 10 or 2.5)",
					      ECHO_LEN, s, (double)o->min / NS_PER_S,
					      (unsigned long long)(o->max / NS_PER_S));
		*(uint64_t *)pp_cfg_field(c, k) = v;
		return 0;
	case T_DURATION:
		ret = pp_parse_duration(s, &v);
		if (ret || v < o->min || v > o->max)
			return pp_cfg_set_err(
			    err, errlen,
			    "'%.*s' is not a duration from %lluus to %llus with its "
			    "unit (e.g. 1ms, 500us or 0)",
			    ECHO_LEN, s, (unsigned long long)(o->min / 1000),
			    (unsigned long long)(o->max / NS_PER_S));
		*(uint64_t *)pp_cfg_field(c, k) = v;
		return 0;
	case T_SIZE:
		ret = pp_size_parse(s, len, &v, why, sizeof(why));
		if (ret)
			return pp_cfg_set_err(err, errlen, "bad size '%.*s': %s", ECHO_LEN, s, why);
		if (v < o->min || v > o->max)
			return pp_cfg_set_err(err, errlen,
					      "size '%.*s' is out of range %lluKiB..%lluGiB",
					      ECHO_LEN, s, (unsigned long long)(o->min / KIB),
					      (unsigned long long)(o->max / GIB));
		*(uint64_t *)pp_cfg_field(c, k) = v;
		return 0;
	case T_ENUM:
		if (k == PP_CFG_USER_UNWIND && !strcmp(s, "shim")) { /* fp's name before tables */
			*(int *)pp_cfg_field(c, k) = PP_USTACK_SHIM;
			return 0;
		}
		for (int i = 0; o->names[i]; i++) {
			if (!strcmp(s, o->names[i])) {
				*(int *)pp_cfg_field(c, k) = i;
				return 0;
			}
		}
		return pp_cfg_set_err(err, errlen, "'%.*s' is not one of %s", ECHO_LEN, s,
				      names_list(o->names, list, sizeof(list)));
	case T_SET: {
		int bits = 0;
		const char *p = s;

		while (s[0] && strcmp(s, "none")) {
			const char *end = strchr(p, ',');
			size_t n = end ? (size_t)(end - p) : strlen(p);
			int i;

			for (i = 0; o->names[i]; i++)
				if (n && strlen(o->names[i]) == n && !strncmp(p, o->names[i], n))
					break;
			if (!o->names[i])
				return pp_cfg_set_err(err, errlen,
						      "'%.*s' is not one of %s (or none)",
						      (int)(n < ECHO_LEN ? n : ECHO_LEN), p,
						      names_list(o->names, list, sizeof(list)));
			bits |= 1 << i;
			if (!end)
				break;
			p = end + 1;
		}
		*(int *)pp_cfg_field(c, k) = bits;
		return 0;
	}
	case T_BOOL:
		if (pp_cfg_parse_bool(s, &b))
			return pp_cfg_set_err(
			    err, errlen,
			    "'%.*s' is not a boolean (true/false, yes/no, on/off, 1/0)", ECHO_LEN,
			    s);
		*(int *)pp_cfg_field(c, k) = b;
		return 0;
	}
	return -EINVAL;
}

/* Loading for another subcommand sets only its keys; the others keep their defaults unchecked. */
bool pp_cfg_key_wanted(const struct pp_run_config *c, int k)
{
	return !c->keys_wanted || (c->keys_wanted & PP_CONFIG_KEY_BIT(k));
}

void pp_cfg_set_origin(struct pp_run_config *c, int k, enum pp_config_source src, const char *fmt,
		       ...)
{
	va_list ap;

	if (!pp_cfg_key_wanted(c, k))
		return;
	c->origin[k].src = src;
	va_start(ap, fmt);
	vsnprintf(c->origin[k].where, sizeof(c->origin[k].where), fmt, ap);
	va_end(ap);
}

/*
 * Stores [val, val+len) as key k; on a bad value adds "loc: reason" to errs. Returns 0,
 * -EINVAL or -ENOMEM.
 */
int pp_cfg_apply(struct pp_run_config *c, int k, const char *val, size_t len,
		 struct pp_config_errors *errs, const char *loc)
{
	char why[PP_CONFIG_ERROR_LEN];
	enum pp_text_fault fault;
	size_t at;
	char *s;
	int ret;

	if (!pp_cfg_key_wanted(c, k))
		return 0;
	if (memchr(val, '\0', len)) {
		pp_cfg_err_add(errs, "%s: the value holds a NUL byte", loc);
		return -EINVAL;
	}
	if (len > MAX_VALUE_LEN) {
		pp_cfg_err_add(errs, "%s: the value is longer than %d bytes", loc, MAX_VALUE_LEN);
		return -EINVAL;
	}
	/* values end up in labels, HTTP headers and log lines: text only, no line breaks */
	fault = pp_text_check(val, len, &at);
	if (fault) {
		pp_cfg_err_add(
		    errs, "%s: the value %s at byte %zu (0x%02x); give plain UTF-8 text", loc,
		    fault == PP_TEXT_BAD_UTF8 ? "is not valid UTF-8" : "holds a control character",
		    at, (unsigned char)val[at]);
		return -EINVAL;
	}
	s = strndup(val, len);
	if (!s) {
		pp_cfg_err_add(errs, "%s: out of memory", loc);
		return -ENOMEM;
	}
	ret = store(c, k, s, why, sizeof(why));
	free(s);
	if (ret == -EINVAL)
		pp_cfg_err_add(errs, "%s: %s", loc, why);
	else if (ret)
		pp_cfg_err_add(errs, "%s: out of memory", loc);
	return ret;
}

/* ---- init / fini --------------------------------------------------------------------------- */

void pp_run_config_fini(struct pp_run_config *c)
{
	if (!c)
		return;
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		if (pp_cfg_table[k].type == T_KV)
			pp_kv_list_free(pp_cfg_field(c, k));
		else if (pp_cfg_table[k].type <= T_URL || pp_cfg_table[k].type == T_LISTEN)
			free(*(char **)pp_cfg_field(c, k));
	}
	memset(c, 0, sizeof(*c));
}

int pp_run_config_init(struct pp_run_config *c)
{
	char why[PP_CONFIG_ERROR_LEN];
	struct utsname u;
	int ret;

	memset(c, 0, sizeof(*c));
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const char *def = pp_cfg_table[k].def;

		pp_cfg_set_origin(c, k, PP_SRC_DEFAULT, "default");
		if (k == PP_CFG_NODE_NAME)
			def = uname(&u) == 0 ? u.nodename : "";
		if (!def) {
			if (pp_cfg_table[k].type <= T_URL || pp_cfg_table[k].type == T_LISTEN)
				def = "";
			else
				continue; /* zero */
		}
		ret = store(c, k, def, why, sizeof(why));
		if (ret) {
			/* a default that does not parse is a bug in the table; tests catch it */
			pp_run_config_fini(c);
			return ret == -ENOMEM ? -ENOMEM : -EINVAL;
		}
	}
	return 0;
}

/* ---- flags and the whole load ------------------------------------------------------------ */

struct flag_value {
	int key;
	const char *val;
};

static int load(int argc, char **argv, char *const *envp, uint64_t keys, struct pp_run_config *out,
		struct pp_config_errors *errs)
{
	struct option longopts[PP_CFG_NKEYS + 1];
	char shortopts[3 + 2 * PP_CFG_NKEYS] = "+:";
	struct flag_value *flags = NULL;
	size_t nflags = 0, so = 2;
	const char *config_path = NULL;
	int ret, bad = 0, c;

	if (errs) {
		errs->n = 0;
		errs->dropped = 0;
	}
	ret = pp_run_config_init(out);
	if (ret) {
		pp_cfg_err_add(errs, "cannot set the defaults: %s", strerror(-ret));
		return ret;
	}
	out->keys_wanted = keys;
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		bool arg = pp_cfg_table[k].type != T_BOOL;

		longopts[k] = (struct option){pp_cfg_table[k].name,
					      arg ? required_argument : no_argument, NULL, 256 + k};
		if (pp_cfg_table[k].short_flag) {
			shortopts[so++] = pp_cfg_table[k].short_flag;
			if (arg)
				shortopts[so++] = ':';
		}
	}
	memset(&longopts[PP_CFG_NKEYS], 0, sizeof(longopts[0]));
	shortopts[so] = '\0';

	flags = calloc(argc > 0 ? (size_t)argc : 1, sizeof(*flags));
	if (!flags) {
		pp_cfg_err_add(errs, "out of memory");
		return -ENOMEM;
	}
	optind = 0; /* glibc: a full re-initialisation, so load can run more than once */
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const char *opt = argv[optind - 1];
		int k = -1;

		if (c == '?' || c == ':') {
			if (optopt >= 256 && optopt < 256 + PP_CFG_NKEYS && c == '?')
				pp_cfg_err_add(errs, "--%s takes no value",
					       pp_cfg_table[optopt - 256].name);
			else if (c == ':')
				pp_cfg_err_add(errs, "option '%s' needs a value", opt);
			else if (optopt)
				pp_cfg_err_add(errs, "unknown option '-%c'", optopt);
			else
				pp_cfg_err_add(errs, "unknown option '%s'", opt);
			bad = 1;
			continue;
		}
		if (c >= 256)
			k = c - 256;
		else
			for (int i = 0; i < PP_CFG_NKEYS; i++)
				if (pp_cfg_table[i].short_flag == c)
					k = i;
		if (k < 0)
			continue;
		if (k == PP_CFG_HELP) {
			out->help = 1;
			pp_cfg_set_origin(out, k, PP_SRC_FLAG, "--help");
			free(flags);
			return 0;
		}
		flags[nflags].key = k;
		flags[nflags].val = pp_cfg_table[k].type == T_BOOL ? "true" : optarg;
		nflags++;
		if (k == PP_CFG_CONFIG)
			config_path = optarg;
	}
	for (int i = optind; i < argc; i++) {
		pp_cfg_err_add(errs, "unexpected argument '%.*s': run takes options only", ECHO_LEN,
			       argv[i]);
		bad = 1;
	}
	for (size_t i = 0; i < nflags; i++) {
		if (pp_cfg_key_wanted(out, flags[i].key))
			continue;
		pp_cfg_err_add(errs, "--%s is an option of run only",
			       pp_cfg_table[flags[i].key].name);
		bad = 1;
	}

	if (!config_path)
		config_path = pp_cfg_env_get(envp, "PEBSPROF_CONFIG");
	if (config_path && *config_path) {
		ret = pp_config_file_load(config_path, out, errs);
		if (ret == -ENOMEM)
			goto out;
		bad |= ret != 0;
	}
	ret = pp_cfg_apply_env(out, envp, errs);
	if (ret == -ENOMEM)
		goto out;
	bad |= ret != 0;
	for (size_t i = 0; i < nflags; i++) {
		int k = flags[i].key;
		char loc[96];

		snprintf(loc, sizeof(loc), "--%s", pp_cfg_table[k].name);
		ret = pp_cfg_apply(out, k, flags[i].val, strlen(flags[i].val), errs, loc);
		if (ret == -ENOMEM)
			goto out;
		if (ret)
			bad = 1;
		else
			pp_cfg_set_origin(out, k, PP_SRC_FLAG, "--%s", pp_cfg_table[k].name);
	}
	ret = pp_run_config_finish(out, errs);
	bad |= ret != 0;
	ret = bad ? -EINVAL : 0;
out:
	free(flags);
	return ret;
}

int pp_run_config_load(int argc, char **argv, char *const *envp, struct pp_run_config *out,
		       struct pp_config_errors *errs)
{
	return load(argc, argv, envp, 0, out, errs);
}

int pp_run_config_load_keys(int argc, char **argv, char *const *envp, uint64_t keys,
			    struct pp_run_config *out, struct pp_config_errors *errs)
{
	return load(argc, argv, envp, keys ? keys : ~0ull, out, errs);
}

const char *pp_run_config_node_name(const struct pp_run_config *c)
{
	return c->origin[PP_CFG_NODE_NAME].src != PP_SRC_DEFAULT && c->node_name[0] ? c->node_name
										    : NULL;
}

struct pp_k8s_meta_opts pp_run_config_k8s_opts(const struct pp_run_config *c)
{
	return (struct pp_k8s_meta_opts){
	    .source = c->k8s_source,
	    .api_url = c->k8s_api_url[0] ? c->k8s_api_url : NULL,
	    .kubelet_url = c->k8s_kubelet_url[0] ? c->k8s_kubelet_url : NULL,
	    .node_name = pp_run_config_node_name(c),
	    .token_path = c->k8s_token_file,
	    .ca_path = c->k8s_ca_file,
	    .kubelet_insecure = c->k8s_kubelet_insecure,
	    .refresh_ms = (uint32_t)(c->k8s_refresh_ns / 1000000),
	};
}

int pp_symbolizer_init(struct pp_symbolizer *out, const struct pp_run_config *c)
{
	char dirs[8192];
	bool kernel_fetch;
	int err;

	memset(out, 0, sizeof(*out));
	out->addresses_only = c->symbolize == PP_SYMBOLIZE_NONE;
	out->no_perf_maps = c->no_perf_maps;
	if (out->addresses_only)
		return 0; /* nothing of the files' symbols is read */
	snprintf(dirs, sizeof(dirs), "%s%s%s", PP_DEBUG_DIRS_DEFAULT, c->debug_dirs[0] ? ":" : "",
		 c->debug_dirs);
	out->debug_dirs = pp_debug_dirs_new(dirs);
	if (!out->debug_dirs) {
		err = -errno;
		pp_error("debug-dirs: \"%s\": %s (absolute directories, colon-separated, at most "
			 "%d with /usr/lib/debug)",
			 c->debug_dirs, strerror(-err), PP_DEBUG_DIRS_MAX);
		return err;
	}
	kernel_fetch = !strcmp(c->kernel_image, "debuginfod");
	if (strcmp(c->kernel_image, "none")) {
		out->kernel_image = (struct pp_kernel_image_opts){
		    .path = c->kernel_image[0] == '/' ? c->kernel_image : NULL,
		    .debug_dirs = out->debug_dirs,
		};
		out->kernel_image_on = 1;
	}
	if (c->debuginfod[0]) {
		struct pp_debuginfod_opts o = {
		    .urls = c->debuginfod,
		    .cache_dir = c->debuginfod_cache,
		    .cache_max_bytes = c->debuginfod_cache_bytes,
		    /* a vmlinux takes minutes on a slow link; a stalled transfer still ends */
		    .max_time_s = kernel_fetch ? KERNEL_IMAGE_MAX_TIME_S : 0,
		};

		out->debuginfod = pp_debuginfod_new(&o);
		if (!out->debuginfod) {
			err = -errno;
			if (err == -ENOENT)
				pp_error("debuginfod: libdebuginfod.so.1 cannot be loaded (Debian "
					 "package libdebuginfod1)");
			else
				pp_error("debuginfod: cannot start (cache %s): %s",
					 c->debuginfod_cache, strerror(-err));
			pp_symbolizer_fini(out);
			return err;
		}
		if (kernel_fetch) {
			out->kernel_image.fetch = pp_debuginfod_fetch;
			out->kernel_image.fetch_ctx = out->debuginfod;
		}
	}
	return 0;
}

void pp_symbolizer_session_opts(struct pp_symbolizer *s, const char *proc_root,
				const char *sysfs_root, struct pp_session_opts *sess)
{
	sess->debug_dirs = s->debug_dirs;
	sess->debuginfod = s->debuginfod;
	sess->addresses_only = s->addresses_only;
	sess->no_perf_maps = s->no_perf_maps;
	if (!s->kernel_image_on)
		return;
	snprintf(s->kernel_image_root, sizeof(s->kernel_image_root), "%s/1/root",
		 proc_root ? proc_root : "/proc");
	s->kernel_image.root = s->kernel_image_root;
	s->kernel_image.sys_root = sysfs_root && sysfs_root[0] ? sysfs_root : NULL;
	sess->kernel_image = &s->kernel_image;
	if (s->kernel_image.fetch) {
		char id[PP_BUILD_ID_HEX_SIZE];

		/* the running kernel's image stays in the cache across restarts */
		if (!pp_kernel_build_id(s->kernel_image.sys_root, id, sizeof(id)))
			pp_debuginfod_pin(s->debuginfod, id);
	}
}

void pp_symbolizer_fini(struct pp_symbolizer *s)
{
	if (!s)
		return;
	pp_debuginfod_free(s->debuginfod);
	pp_debug_dirs_free(s->debug_dirs);
	memset(s, 0, sizeof(*s));
}

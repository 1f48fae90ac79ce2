/*
 * Validation of `pebsprof run`'s configuration: each value's syntax (k=v lists with
 * percent-encoding, URLs, ADDR:PORT, sizes, booleans) and the rules across keys checked once
 * every source has been applied.
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

#include "config_internal.h"

#include <pebsprof/otlp.h>
#include <pebsprof/pyroscope.h>

/* ---- leaf parsers ------------------------------------------------------------------------ */

bool pp_cfg_is_ows(char ch)
{
	return ch == ' ' || ch == '\t';
}

static bool is_tchar(unsigned char ch)
{
	/* RFC 9110 token characters: what a header name may hold. */
	return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int hexval(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (unsigned char)tolower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

void pp_kv_list_free(struct pp_kv_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].key);
		free(l->items[i].value);
	}
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

/* Percent-decodes [s, s+len) into a new string; rejects control characters after decoding. */
static int kv_decode(const char *s, size_t len, char **out, const char **why)
{
	char *v = malloc(len + 1);
	size_t o = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '%') {
			int hi = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
			int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				free(v);
				*why = "a bad percent escape (give %XX with two hex digits)";
				return -EINVAL;
			}
			ch = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			free(v);
			*why = "a control character (CR, LF, NUL...)";
			return -EINVAL;
		}
		v[o++] = (char)ch;
	}
	v[o] = '\0';
	*out = v;
	return 0;
}

int pp_resource_attributes_check(const struct pp_kv_list *l, char *err, size_t errlen)
{
	_Static_assert(MAX_KV_ITEMS <= PP_OTLP_MAX_RESOURCE_ATTRS,
		       "a list the parser takes is sent whole");
	for (size_t i = 0; i < l->n; i++) {
		size_t kl = strlen(l->items[i].key), vl = strlen(l->items[i].value);

		if (kl > PP_PYROSCOPE_LABEL_NAME_MAX_LEN)
			return pp_cfg_set_err(
			    err, errlen,
			    "attribute %zu: a %zu-byte key (\"%.40s...\"); Pyroscope "
			    "refuses label names over %d bytes",
			    i + 1, kl, l->items[i].key, PP_PYROSCOPE_LABEL_NAME_MAX_LEN);
		if (vl > PP_PYROSCOPE_LABEL_VALUE_MAX_LEN)
			return pp_cfg_set_err(
			    err, errlen,
			    "attribute %.80s: a %zu-byte value; Pyroscope refuses label "
			    "values over %d bytes",
			    l->items[i].key, vl, PP_PYROSCOPE_LABEL_VALUE_MAX_LEN);
	}
	return 0;
}

int pp_kv_list_parse(const char *buf, size_t len, bool header_names, struct pp_kv_list *out,
		     char *err, size_t errlen)
{
	struct pp_kv_list l = {NULL, 0};
	size_t pos = 0, item = 0;
	int ret = 0;

	while (pos <= len && ret == 0) {
		const char *s = buf + pos, *e = memchr(s, ',', len - pos);
		size_t n = e ? (size_t)(e - s) : len - pos;
		const char *eq, *k, *v;
		size_t kl, vl;

		pos += n + 1;
		item++;
		while (n && pp_cfg_is_ows(*s)) {
			s++;
			n--;
		}
		while (n && pp_cfg_is_ows(s[n - 1]))
			n--;
		if (!n)
			continue; /* "a=1,,b=2" and a trailing comma are harmless */
		eq = memchr(s, '=', n);
		if (!eq) {
			ret = pp_cfg_set_err(err, errlen,
					     "item %zu has no '=' (give key=value pairs)", item);
			break;
		}
		k = s;
		kl = (size_t)(eq - s);
		while (kl && pp_cfg_is_ows(k[kl - 1]))
			kl--;
		v = eq + 1;
		vl = n - (size_t)(v - s);
		while (vl && pp_cfg_is_ows(*v)) {
			v++;
			vl--;
		}
		if (!kl) {
			ret = pp_cfg_set_err(err, errlen, "item %zu has an empty key", item);
			break;
		}
		/* header names are tokens; attribute keys any text, percent-encoded (baggage) */
		for (size_t i = 0; header_names && i < kl; i++) {
			if (!is_tchar((unsigned char)k[i])) {
				ret = pp_cfg_set_err(
				    err, errlen,
				    "item %zu: key '%.*s' holds a character a header "
				    "name cannot have",
				    item, (int)(kl > ECHO_LEN ? ECHO_LEN : kl), k);
				break;
			}
		}
		if (ret)
			break;
		if (l.n == MAX_KV_ITEMS) {
			ret = pp_cfg_set_err(err, errlen, "more than %d items", MAX_KV_ITEMS);
			break;
		}
		struct pp_kv *grown = realloc(l.items, (l.n + 1) * sizeof(*grown));
		const char *why = NULL;

		if (!grown) {
			ret = -ENOMEM;
			break;
		}
		l.items = grown;
		l.items[l.n].key = NULL;
		l.items[l.n].value = NULL;
		if (header_names) {
			l.items[l.n].key = strndup(k, kl);
			ret = l.items[l.n].key ? 0 : -ENOMEM;
		} else {
			ret = kv_decode(k, kl, &l.items[l.n].key, &why);
			if (ret == -EINVAL)
				pp_cfg_set_err(err, errlen, "item %zu: the key '%.*s' holds %s",
					       item, (int)(kl > ECHO_LEN ? ECHO_LEN : kl), k, why);
			else if (!ret && !l.items[l.n].key[0])
				ret =
				    pp_cfg_set_err(err, errlen, "item %zu has an empty key", item);
		}
		if (ret) {
			free(l.items[l.n].key);
			break;
		}
		l.n++;
		ret = kv_decode(v, vl, &l.items[l.n - 1].value, &why);
		if (ret == -EINVAL)
			pp_cfg_set_err(err, errlen, "item %zu: the value of '%.*s' holds %s", item,
				       (int)(kl > ECHO_LEN ? ECHO_LEN : kl), k, why);
		else if (ret == -ENOMEM)
			pp_cfg_set_err(err, errlen, "out of memory");
	}
	if (ret) {
		pp_kv_list_free(&l);
		return ret;
	}
	*out = l;
	return 0;
}

static int check_port(const char *p, size_t n, char *err, size_t errlen)
{
	unsigned long port = 0;

	if (!n || n > 5)
		return pp_cfg_set_err(err, errlen, "bad port '%.*s' (give 1..65535)", (int)n, p);
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return pp_cfg_set_err(err, errlen, "bad port '%.*s' (give 1..65535)",
					      (int)n, p);
		port = port * 10 + (unsigned long)(p[i] - '0');
	}
	if (port < 1 || port > 65535)
		return pp_cfg_set_err(err, errlen, "bad port '%.*s' (give 1..65535)", (int)n, p);
	return 0;
}

/* host[:port] where host is a name, IPv4, or [IPv6]; empty host only when allowed. */
static int check_hostport(const char *s, size_t n, bool need_host, bool need_port, char *err,
			  size_t errlen)
{
	const char *colon;
	size_t hl;

	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return pp_cfg_set_err(err, errlen, "unclosed '[' in the host");
		hl = (size_t)(close - s);
		if (hl < 3)
			return pp_cfg_set_err(err, errlen, "empty IPv6 address in brackets");
		for (size_t i = 1; i < hl; i++) {
			unsigned char ch = (unsigned char)s[i];

			if (!isxdigit(ch) && ch != ':' && ch != '.')
				return pp_cfg_set_err(err, errlen,
						      "bad character '%c' in an IPv6 address", ch);
		}
		colon = close + 1;
		if (colon == s + n) {
			if (need_port)
				return pp_cfg_set_err(err, errlen, "no port (give ADDR:PORT)");
			return 0;
		}
		if (*colon != ':')
			return pp_cfg_set_err(err, errlen, "text after ']' that is not ':PORT'");
		return check_port(colon + 1, n - (size_t)(colon + 1 - s), err, errlen);
	}
	colon = memchr(s, ':', n);
	hl = colon ? (size_t)(colon - s) : n;
	if (!hl && need_host)
		return pp_cfg_set_err(err, errlen, "no host");
	for (size_t i = 0; i < hl; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_')
			return pp_cfg_set_err(err, errlen, "bad character '%c' in the host", ch);
	}
	if (!colon) {
		if (need_port)
			return pp_cfg_set_err(err, errlen, "no port (give ADDR:PORT, e.g. :9090)");
		return 0;
	}
	if (memchr(colon + 1, ':', n - hl - 1))
		return pp_cfg_set_err(err, errlen,
				      "an IPv6 address goes in brackets, e.g. [::1]:9090");
	return check_port(colon + 1, n - hl - 1, err, errlen);
}

int pp_url_check(const char *buf, size_t len, char *err, size_t errlen)
{
	const char *auth, *end = buf + len, *p, *at;
	size_t i;

	if (!len)
		return pp_cfg_set_err(err, errlen, "empty URL");
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch <= 0x20 || ch >= 0x7f)
			return pp_cfg_set_err(err, errlen,
					      "a space, control or non-ASCII character");
	}
	if (len > 7 && !strncasecmp(buf, "http://", 7))
		auth = buf + 7;
	else if (len > 8 && !strncasecmp(buf, "https://", 8))
		auth = buf + 8;
	else
		return pp_cfg_set_err(err, errlen, "the scheme must be http:// or https://");
	if (memchr(buf, '#', len))
		return pp_cfg_set_err(err, errlen,
				      "a fragment ('#...') has no place in an endpoint");
	for (p = auth; p < end && *p != '/' && *p != '?'; p++)
		;
	/* userinfo, if any, ends at the last '@' of the authority */
	at = NULL;
	for (const char *q = auth; q < p; q++)
		if (*q == '@')
			at = q;
	if (at)
		auth = at + 1;
	if (auth == p)
		return pp_cfg_set_err(err, errlen, "no host");
	return check_hostport(auth, (size_t)(p - auth), true, false, err, errlen);
}

int pp_listen_check(const char *buf, size_t len, char *err, size_t errlen)
{
	if (!len)
		return 0;
	return check_hostport(buf, len, false, true, err, errlen);
}

int pp_size_parse(const char *buf, size_t len, uint64_t *out, char *err, size_t errlen)
{
	static const struct {
		const char *s;
		uint64_t mult;
	} suffixes[] = {{"", 1},    {"b", 1},	  {"k", KIB}, {"kib", KIB},
			{"m", MIB}, {"mib", MIB}, {"g", GIB}, {"gib", GIB}};
	uint64_t v = 0;
	size_t i = 0, sl;

	while (i < len && isdigit((unsigned char)buf[i])) {
		unsigned d = (unsigned)(buf[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return pp_cfg_set_err(err, errlen, "too large");
		v = v * 10 + d;
		i++;
	}
	if (!i)
		return pp_cfg_set_err(err, errlen,
				      "not a size (give bytes, or a number with KiB, MiB "
				      "or GiB)");
	while (i < len && pp_cfg_is_ows(buf[i]))
		i++;
	sl = len - i;
	for (size_t s = 0; s < sizeof(suffixes) / sizeof(suffixes[0]); s++) {
		if (strlen(suffixes[s].s) == sl && !strncasecmp(buf + i, suffixes[s].s, sl)) {
			if (suffixes[s].mult > 1 && v > UINT64_MAX / suffixes[s].mult)
				return pp_cfg_set_err(err, errlen, "too large");
			*out = v * suffixes[s].mult;
			return 0;
		}
	}
	if (sl == 2 && strchr("kKmMgG", buf[i]) && (buf[i + 1] == 'B' || buf[i + 1] == 'b'))
		return pp_cfg_set_err(err, errlen,
				      "say KiB, MiB or GiB (powers of 1024), not '%.2s'", buf + i);
	return pp_cfg_set_err(err, errlen, "unknown suffix '%.*s' (use KiB, MiB or GiB)",
			      (int)(sl > 16 ? 16 : sl), buf + i);
}

int pp_cfg_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

void pp_cfg_url_redact(const char *u, char *out, size_t outlen)
{
	const char *auth = strstr(u, "://"), *p, *at = NULL;

	if (!auth) {
		snprintf(out, outlen, "%s", u);
		return;
	}
	auth += 3;
	for (p = auth; *p && *p != '/' && *p != '?'; p++)
		if (*p == '@')
			at = p;
	if (!at) {
		snprintf(out, outlen, "%s", u);
		return;
	}
	snprintf(out, outlen, "%.*s<redacted>%s", (int)(auth - u), u, at);
}

/* ---- cross-key rules ----------------------------------------------------------------------- */

const char *pp_cfg_origin_text(const struct pp_run_config *c, int k, char *buf, size_t len)
{
	const struct pp_config_origin *o = &c->origin[k];

	switch (o->src) {
	case PP_SRC_FILE:
		snprintf(buf, len, "file %s", o->where);
		break;
	case PP_SRC_ENV:
		snprintf(buf, len, "env %s", o->where);
		break;
	case PP_SRC_FLAG:
		snprintf(buf, len, "flag %s", o->where);
		break;
	default:
		snprintf(buf, len, "default");
		break;
	}
	return buf;
}

/* Whether url (already checked) has a path other than "/". */
static bool url_has_path(const char *url)
{
	const char *p = strstr(url, "://");
	const char *slash = p ? strchr(p + 3, '/') : NULL;

	return slash && slash[1] != '\0';
}

int pp_run_config_finish(struct pp_run_config *c, struct pp_config_errors *errs)
{
	enum pp_config_source fs = c->origin[PP_CFG_FREQ].src, ps = c->origin[PP_CFG_PERIOD].src;
	char a[PP_CONFIG_WHERE_LEN + 8], b[PP_CONFIG_WHERE_LEN + 8];
	int ret = 0;

	if (ps != PP_SRC_DEFAULT) {
		if (fs == ps) {
			pp_cfg_err_add(
			    errs, "freq (%s) and period (%s) exclude each other: set one of them",
			    pp_cfg_origin_text(c, PP_CFG_FREQ, a, sizeof(a)),
			    pp_cfg_origin_text(c, PP_CFG_PERIOD, b, sizeof(b)));
			ret = -EINVAL;
		} else if (fs > ps) {
			c->period = 0; /* the later layer wins */
		} else {
			c->freq_hz = 0;
		}
	}
	if (c->origin[PP_CFG_STALL_TIMEOUT].src == PP_SRC_DEFAULT)
		c->stall_timeout_ns =
		    c->interval_ns * 2 > DEFAULT_STALL_NS ? c->interval_ns * 2 : DEFAULT_STALL_NS;
	if (c->origin[PP_CFG_EXPORTER].src == PP_SRC_DEFAULT)
		c->exporter = c->endpoint[0] ? PP_EXPORTER_OTLP : PP_EXPORTER_FILE;
	/*
	 * The Collector's and Alloy's `endpoint` convention for a flag or the file: a URL
	 * without a path is a base the signal's path goes after; with a path it is used as is
	 * (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT is always used as is; the base variable got
	 * its path when it was read).
	 */
	if (c->exporter == PP_EXPORTER_OTLP && c->endpoint[0] &&
	    (c->origin[PP_CFG_ENDPOINT].src == PP_SRC_FLAG ||
	     c->origin[PP_CFG_ENDPOINT].src == PP_SRC_FILE) &&
	    !url_has_path(c->endpoint)) {
		char *full = pp_cfg_profiles_url(c->endpoint);

		if (!full)
			return -ENOMEM;
		free(c->endpoint);
		c->endpoint = full;
	}
	if (strcmp(c->kernel_image, "auto") && strcmp(c->kernel_image, "none") &&
	    strcmp(c->kernel_image, "debuginfod") && c->kernel_image[0] != '/') {
		pp_cfg_err_add(
		    errs, "kernel-image '%s' (%s): auto, debuginfod, none or an absolute path",
		    c->kernel_image, pp_cfg_origin_text(c, PP_CFG_KERNEL_IMAGE, a, sizeof(a)));
		ret = -EINVAL;
	} else if (!strcmp(c->kernel_image, "debuginfod") && !c->debuginfod[0]) {
		pp_cfg_err_add(
		    errs,
		    "kernel-image debuginfod (%s) needs debuginfod servers: give "
		    "--debuginfod URLS, debuginfod in the config file or DEBUGINFOD_URLS",
		    pp_cfg_origin_text(c, PP_CFG_KERNEL_IMAGE, a, sizeof(a)));
		ret = -EINVAL;
	}
	if (c->origin[PP_CFG_EXPORTER].src != PP_SRC_DEFAULT && c->exporter != PP_EXPORTER_FILE &&
	    !c->endpoint[0]) {
		pp_cfg_err_add(
		    errs,
		    "exporter '%s' (%s) needs an endpoint: give --endpoint URL, endpoint in "
		    "the config file or OTEL_EXPORTER_OTLP_ENDPOINT, or use exporter file",
		    pp_cfg_exporter_names[c->exporter],
		    pp_cfg_origin_text(c, PP_CFG_EXPORTER, a, sizeof(a)));
		ret = -EINVAL;
	}
	return ret;
}

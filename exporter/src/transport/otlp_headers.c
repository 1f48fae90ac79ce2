/*
 * OTEL_EXPORTER_OTLP_HEADERS parser (W3C baggage style "k=v,k2=v2", percent-decoded): the
 * extra HTTP headers the transport sends, such as X-Scope-OrgID for multi-tenant Pyroscope
 * or Authorization. Values become request header lines, so anything that could break a
 * line (CR, LF, NUL) is refused; values are never echoed in errors (they are credentials).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pebsprof/transport.h>

#include "base/kvlist.h"

#define PP_STR_(x) #x
#define PP_STR(x) PP_STR_(x)

/* Set by the transport itself; a second copy would contradict the body it sends. */
static const char *const reserved[] = {
    "content-type", "content-encoding", "content-length", "transfer-encoding",
    "host",	    "expect",		"connection",
};

/* RFC 9110 token character. */
static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static const char *check_name(const char *k, size_t klen)
{
	if (!klen)
		return "the key is empty";
	for (size_t i = 0; i < klen; i++)
		if (!is_tchar((unsigned char)k[i]))
			return "the key is not an HTTP header name (letters, digits, "
			       "!#$%&'*+-.^_`|~)";
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (!strcasecmp(k, reserved[i]))
			return "this header is set by the exporter itself";
	return NULL;
}

static const char *check_value(const char *v, size_t vlen)
{
	for (size_t i = 0; i < vlen; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "the value holds a control character (CR, LF, NUL...)";
	}
	return NULL;
}

/* Writes the error for pair number pairno [p, pe): its key, or the start of the text. */
static void pair_error(char *err, size_t errlen, uint32_t pairno, const char *p, const char *pe,
		       const char *why)
{
	const char *eq, *ks = p, *ke;

	eq = memchr(p, '=', (size_t)(pe - p));
	ke = eq ? eq : pe;
	pp_kvlist_trim(&ks, &ke);
	if (eq)
		snprintf(err, errlen, "OTEL_EXPORTER_OTLP_HEADERS pair %u (key \"%.*s\"): %s",
			 pairno, (int)(ke - ks > 64 ? 64 : ke - ks), ks, why);
	else /* maybe "Authorization: Bearer x": show only its start */
		snprintf(err, errlen, "OTEL_EXPORTER_OTLP_HEADERS pair %u (\"%.*s%s\"): %s", pairno,
			 (int)(ke - ks > 16 ? 16 : ke - ks), ks, ke - ks > 16 ? "..." : "", why);
}

int pp_otlp_parse_headers(const char *buf, size_t len, struct pp_http_header **out, uint32_t *n,
			  char *err, size_t errlen)
{
	static const struct pp_kvlist_rules rules = {
	    .elem_size = sizeof(struct pp_http_header),
	    .key_off = offsetof(struct pp_http_header, name),
	    .val_off = offsetof(struct pp_http_header, value),
	    .max = PP_TRANSPORT_MAX_HEADERS,
	    .too_many = "more than " PP_STR(PP_TRANSPORT_MAX_HEADERS) " headers",
	    .nocase_keys = true,
	    .check_key = check_name,
	    .check_value = check_value,
	    .report = pair_error,
	};
	void *hdrs = NULL;
	int ret;

	if ((!buf && len) || !out || !n)
		return -EINVAL;
	ret = pp_kvlist_parse(buf, len, &rules, &hdrs, n, err, errlen);
	*out = hdrs;
	return ret;
}

void pp_otlp_free_headers(struct pp_http_header *headers)
{
	free(headers);
}

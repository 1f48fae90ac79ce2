/*
 * OTEL_EXPORTER_OTLP_HEADERS parser (W3C baggage style "k=v,k2=v2", percent-decoded): the
 * extra HTTP headers the transport sends, such as X-Scope-OrgID for multi-tenant Pyroscope
 * or Authorization. Values become request header lines, so anything that could break a
 * line (CR, LF, NUL) is refused; values are never echoed in errors (they are credentials).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pebsprof/transport.h>

#define PP_STR_(x) #x
#define PP_STR(x) PP_STR_(x)

/* Set by the transport itself; a second copy would contradict the body it sends. */
static const char *const reserved[] = {
    "content-type", "content-encoding", "content-length", "transfer-encoding",
    "host",	    "expect",		"connection",
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static void trim(const char **s, const char **e)
{
	while (*s < *e && is_blank(**s))
		(*s)++;
	while (*e > *s && is_blank((*e)[-1]))
		(*e)--;
}

/* RFC 9110 token character. */
static bool is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Percent-decodes [s, e) into out (room for e - s + 1); returns NULL or what is wrong. */
static const char *pct_decode(const char *s, const char *e, char *out, size_t *outlen)
{
	char *o = out;

	while (s < e) {
		char c = *s++;

		if (c == '%') {
			int hi = e - s >= 2 ? hexval(s[0]) : -1, lo = hi >= 0 ? hexval(s[1]) : -1;

			if (lo < 0)
				return "'%' is not followed by two hex digits";
			c = (char)(hi << 4 | lo);
			s += 2;
		}
		*o++ = c;
	}
	*o = '\0';
	*outlen = (size_t)(o - out);
	return NULL;
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

	if (!err || !errlen)
		return;
	eq = memchr(p, '=', (size_t)(pe - p));
	ke = eq ? eq : pe;
	trim(&ks, &ke);
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
	const char *p = buf, *end = buf + len;
	struct pp_http_header *hdrs;
	size_t pairs = 1;
	uint32_t count = 0, pairno = 0;
	char *strs;

	if ((!buf && len) || !out || !n)
		return -EINVAL;
	*out = NULL;
	*n = 0;
	if (err && errlen)
		err[0] = '\0';
	if (!len)
		return 0;
	for (const char *q = buf; q < end; q++)
		pairs += *q == ',';
	/* One block: the headers, then their decoded strings (never longer than the input). */
	hdrs = malloc(pairs * sizeof(*hdrs) + len + 2 * pairs);
	if (!hdrs)
		return -ENOMEM;
	strs = (char *)(hdrs + pairs);

	for (;;) {
		const char *pe = memchr(p, ',', (size_t)(end - p)), *ks = p, *ke, *vs, *ve, *eq;
		const char *why = NULL;
		char *k = strs, *v;
		size_t klen = 0, vlen = 0;
		int ret = -EINVAL;
		uint32_t j;

		pe = pe ? pe : end;
		ve = pe;
		pairno++;
		trim(&ks, &ve);
		if (ks == ve) /* blank pairs (a trailing comma) are skipped */
			goto next;
		eq = memchr(ks, '=', (size_t)(ve - ks));
		if (!eq) {
			why = "no '=' between key and value";
			goto fail;
		}
		ke = eq;
		vs = eq + 1;
		trim(&ks, &ke);
		trim(&vs, &ve);
		why = pct_decode(ks, ke, k, &klen);
		if (!why)
			why = check_name(k, klen);
		if (why)
			goto fail;
		v = k + klen + 1;
		why = pct_decode(vs, ve, v, &vlen);
		if (!why)
			why = check_value(v, vlen);
		if (why)
			goto fail;
		strs = v + vlen + 1;
		for (j = 0; j < count && strcasecmp(hdrs[j].name, k) != 0; j++)
			;
		if (j < count) {
			hdrs[j].value = v; /* the last value of a repeated name wins */
		} else if (count == PP_TRANSPORT_MAX_HEADERS) {
			why = "more than " PP_STR(PP_TRANSPORT_MAX_HEADERS) " headers";
			ret = -E2BIG;
			goto fail;
		} else {
			hdrs[count].name = k;
			hdrs[count].value = v;
			count++;
		}
	next:
		if (pe == end)
			break;
		p = pe + 1;
		continue;
	fail:
		pair_error(err, errlen, pairno, p, pe, why);
		free(hdrs);
		return ret;
	}
	if (!count) {
		free(hdrs);
		return 0;
	}
	*out = hdrs;
	*n = count;
	return 0;
}

void pp_otlp_free_headers(struct pp_http_header *headers)
{
	free(headers);
}

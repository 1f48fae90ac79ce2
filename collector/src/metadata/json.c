/*
 * Strict JSON pull parser (see json.h). Validation follows RFC 8259 exactly: no comments, no
 * trailing commas, no leading zeros, no control characters or invalid UTF-8 inside strings,
 * surrogate escapes only in valid pairs. Nesting is tracked with two bit stacks, so skipping
 * a value is a loop, never recursion, whatever the input.
 */
#include "json.h"

#include <errno.h>
#include <string.h>

static int fail(struct pp_json *j, int err)
{
	if (!j->err)
		j->err = err;
	return j->err;
}

void pp_json_init(struct pp_json *j, const char *buf, size_t len, unsigned max_depth)
{
	memset(j, 0, sizeof(*j));
	j->buf = buf;
	j->len = buf ? len : 0;
	j->max_depth =
	    max_depth == 0 || max_depth > PP_JSON_MAX_DEPTH ? PP_JSON_MAX_DEPTH : max_depth;
}

static void skip_ws(struct pp_json *j)
{
	while (j->pos < j->len) {
		char c = j->buf[j->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		j->pos++;
	}
}

enum pp_json_type pp_json_peek(struct pp_json *j)
{
	if (j->err)
		return PP_JSON_NONE;
	skip_ws(j);
	if (j->pos >= j->len)
		return PP_JSON_NONE;
	switch (j->buf[j->pos]) {
	case '{':
		return PP_JSON_OBJECT;
	case '[':
		return PP_JSON_ARRAY;
	case '"':
		return PP_JSON_STRING;
	case 't':
		return PP_JSON_TRUE;
	case 'f':
		return PP_JSON_FALSE;
	case 'n':
		return PP_JSON_NULL;
	case '-':
	case '0':
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
	case '8':
	case '9':
		return PP_JSON_NUMBER;
	default:
		return PP_JSON_NONE;
	}
}

static int enter(struct pp_json *j, char open, int obj)
{
	uint64_t bit;

	if (j->err)
		return j->err;
	skip_ws(j);
	if (j->pos >= j->len || j->buf[j->pos] != open)
		return fail(j, -EPROTO);
	if (j->depth >= j->max_depth)
		return fail(j, -E2BIG);
	j->pos++;
	bit = (uint64_t)1 << j->depth;
	if (obj)
		j->is_obj |= bit;
	else
		j->is_obj &= ~bit;
	j->has_item &= ~bit;
	j->depth++;
	return 0;
}

int pp_json_enter_object(struct pp_json *j)
{
	return enter(j, '{', 1);
}

int pp_json_enter_array(struct pp_json *j)
{
	return enter(j, '[', 0);
}

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

/* Four hex digits at p[0..4) (bounds checked by the caller), or -1. */
static long hex4(const char *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/*
 * Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80), or 0. Overlong forms,
 * surrogates and code points above U+10FFFF are invalid (RFC 3629).
 */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
	unsigned char c = s[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (avail < n)
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* Validate the string starting at the opening quote at j->pos; consume it. */
static int scan_string(struct pp_json *j, struct pp_json_str *out)
{
	size_t i = j->pos + 1;
	int escaped = 0;

	while (i < j->len) {
		unsigned char c = (unsigned char)j->buf[i];

		if (c == '"') {
			if (out) {
				out->p = j->buf + j->pos + 1;
				out->len = i - j->pos - 1;
				out->escaped = escaped;
			}
			j->pos = i + 1;
			return 0;
		}
		if (c < 0x20)
			return fail(j, -EPROTO);
		if (c == '\\') {
			escaped = 1;
			if (i + 1 >= j->len)
				return fail(j, -EPROTO);
			c = (unsigned char)j->buf[i + 1];
			if (c == 'u') {
				long cp;

				if (j->len - i < 6 || (cp = hex4(j->buf + i + 2)) < 0)
					return fail(j, -EPROTO);
				i += 6;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return fail(j, -EPROTO);
				if (cp >= 0xd800 && cp <= 0xdbff) {
					long lo;

					if (j->len - i < 6 || j->buf[i] != '\\' ||
					    j->buf[i + 1] != 'u' ||
					    (lo = hex4(j->buf + i + 2)) < 0 || lo < 0xdc00 ||
					    lo > 0xdfff)
						return fail(j, -EPROTO);
					i += 6;
				}
				continue;
			}
			if (!strchr("\"\\/bfnrt", c) || c == 0)
				return fail(j, -EPROTO);
			i += 2;
			continue;
		}
		if (c >= 0x80) {
			size_t n = utf8_len((const unsigned char *)j->buf + i, j->len - i);

			if (!n)
				return fail(j, -EPROTO);
			i += n;
			continue;
		}
		i++;
	}
	return fail(j, -EPROTO);
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int scan_number(struct pp_json *j)
{
	size_t i = j->pos;

	if (i < j->len && j->buf[i] == '-')
		i++;
	if (i >= j->len)
		return fail(j, -EPROTO);
	if (j->buf[i] == '0') {
		i++;
	} else if (is_digit(j->buf[i])) {
		while (i < j->len && is_digit(j->buf[i]))
			i++;
	} else {
		return fail(j, -EPROTO);
	}
	if (i < j->len && j->buf[i] == '.') {
		i++;
		if (i >= j->len || !is_digit(j->buf[i]))
			return fail(j, -EPROTO);
		while (i < j->len && is_digit(j->buf[i]))
			i++;
	}
	if (i < j->len && (j->buf[i] == 'e' || j->buf[i] == 'E')) {
		i++;
		if (i < j->len && (j->buf[i] == '+' || j->buf[i] == '-'))
			i++;
		if (i >= j->len || !is_digit(j->buf[i]))
			return fail(j, -EPROTO);
		while (i < j->len && is_digit(j->buf[i]))
			i++;
	}
	j->pos = i;
	return 0;
}

static int scan_literal(struct pp_json *j, const char *lit)
{
	size_t n = strlen(lit);

	if (j->len - j->pos < n || memcmp(j->buf + j->pos, lit, n) != 0)
		return fail(j, -EPROTO);
	j->pos += n;
	return 0;
}

int pp_json_read_string(struct pp_json *j, struct pp_json_str *out)
{
	if (pp_json_peek(j) != PP_JSON_STRING)
		return fail(j, -EPROTO);
	return scan_string(j, out);
}

/* After a member or element: the container's separator or its end comes next. */
static int next_item(struct pp_json *j, char close)
{
	uint64_t bit;

	if (j->err)
		return j->err;
	if (j->depth == 0)
		return fail(j, -EPROTO);
	bit = (uint64_t)1 << (j->depth - 1);
	if (!!(j->is_obj & bit) != (close == '}'))
		return fail(j, -EPROTO);
	skip_ws(j);
	if (j->pos >= j->len)
		return fail(j, -EPROTO);
	if (j->buf[j->pos] == close) {
		j->pos++;
		j->depth--;
		return 0;
	}
	if (j->has_item & bit) {
		if (j->buf[j->pos] != ',')
			return fail(j, -EPROTO);
		j->pos++;
		skip_ws(j);
	}
	j->has_item |= bit;
	return 1;
}

int pp_json_next_member(struct pp_json *j, struct pp_json_str *key)
{
	struct pp_json_str k;
	int rc = next_item(j, '}');

	if (rc <= 0)
		return rc;
	if (j->pos >= j->len || j->buf[j->pos] != '"')
		return fail(j, -EPROTO);
	rc = scan_string(j, &k);
	if (rc)
		return rc;
	skip_ws(j);
	if (j->pos >= j->len || j->buf[j->pos] != ':')
		return fail(j, -EPROTO);
	j->pos++;
	if (key)
		*key = k;
	return 1;
}

int pp_json_next_element(struct pp_json *j)
{
	int rc = next_item(j, ']');

	if (rc <= 0)
		return rc;
	/* "[1,]": the separator must be followed by a value, not the end. */
	if (pp_json_peek(j) == PP_JSON_NONE)
		return fail(j, -EPROTO);
	return 1;
}

static int consume_scalar(struct pp_json *j, enum pp_json_type t)
{
	switch (t) {
	case PP_JSON_STRING:
		return scan_string(j, NULL);
	case PP_JSON_NUMBER:
		return scan_number(j);
	case PP_JSON_TRUE:
		return scan_literal(j, "true");
	case PP_JSON_FALSE:
		return scan_literal(j, "false");
	case PP_JSON_NULL:
		return scan_literal(j, "null");
	default:
		return fail(j, -EPROTO);
	}
}

int pp_json_skip(struct pp_json *j)
{
	enum pp_json_type t = pp_json_peek(j);
	unsigned base = j->depth;

	if (t != PP_JSON_OBJECT && t != PP_JSON_ARRAY)
		return consume_scalar(j, t);
	if (enter(j, t == PP_JSON_OBJECT ? '{' : '[', t == PP_JSON_OBJECT))
		return j->err;
	while (j->depth > base) {
		int obj = !!(j->is_obj & ((uint64_t)1 << (j->depth - 1)));
		int rc = obj ? pp_json_next_member(j, NULL) : pp_json_next_element(j);

		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		t = pp_json_peek(j);
		if (t == PP_JSON_OBJECT || t == PP_JSON_ARRAY)
			rc = enter(j, t == PP_JSON_OBJECT ? '{' : '[', t == PP_JSON_OBJECT);
		else
			rc = consume_scalar(j, t);
		if (rc)
			return rc;
	}
	return 0;
}

int pp_json_finish(struct pp_json *j)
{
	if (j->err)
		return j->err;
	if (j->depth)
		return fail(j, -EPROTO);
	skip_ws(j);
	if (j->pos != j->len)
		return fail(j, -EPROTO);
	return 0;
}

static size_t put_utf8(char *o, long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

int pp_json_str_decode(const struct pp_json_str *s, char *out, size_t cap)
{
	size_t o = 0;

	if (!cap)
		return -E2BIG;
	for (size_t i = 0; i < s->len;) {
		char tmp[4];
		const char *src = tmp;
		size_t n;
		char c = s->p[i];

		if (c != '\\') {
			src = s->p + i;
			n = 1;
			i++;
		} else if (s->p[i + 1] == 'u') {
			/* The string was validated, so the digits and any pair are there. */
			long cp = hex4(s->p + i + 2);

			i += 6;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				cp =
				    0x10000 + ((cp - 0xd800) << 10) + (hex4(s->p + i + 2) - 0xdc00);
				i += 6;
			}
			if (cp == 0)
				return -EILSEQ;
			n = put_utf8(tmp, cp);
		} else {
			static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";

			tmp[0] = to[strchr(from, s->p[i + 1]) - from];
			n = 1;
			i += 2;
		}
		if (cap - 1 - o < n)
			return -E2BIG;
		memcpy(out + o, src, n);
		o += n;
	}
	out[o] = '\0';
	return (int)o;
}

int pp_json_str_eq(const struct pp_json_str *s, const char *lit)
{
	char buf[256];
	size_t n = strlen(lit);
	int rc;

	if (!s->escaped)
		return s->len == n && memcmp(s->p, lit, n) == 0;
	if (n >= sizeof(buf))
		return 0; /* callers compare with short keys only */
	rc = pp_json_str_decode(s, buf, sizeof(buf));
	return rc >= 0 && (size_t)rc == n && memcmp(buf, lit, n) == 0;
}

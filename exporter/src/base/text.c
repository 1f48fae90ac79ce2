/* Checking and cleaning text from outside the agent: see pebsprof/text.h. */
#include <pebsprof/text.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The length of the valid UTF-8 sequence at s[0..len) (1 to 4) and its code point, or 0 when
 * s[0] does not begin one (RFC 3629: shortest form only, no surrogates, at most U+10FFFF).
 */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		v = c & 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		v = c & 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		v = c & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return n;
}

static bool is_control(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

enum pp_text_fault pp_text_check(const char *s, size_t len, size_t *at)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_decode(u + i, len - i, &cp);
		enum pp_text_fault f = !n ? PP_TEXT_BAD_UTF8 : is_control(cp) ? PP_TEXT_CONTROL : 0;

		if (f) {
			if (at)
				*at = i;
			return f;
		}
		i += n;
	}
	return PP_TEXT_CLEAN;
}

bool pp_text_is_clean(const char *s)
{
	return !s || pp_text_check(s, strlen(s), NULL) == PP_TEXT_CLEAN;
}

size_t pp_text_clean(const char *s, size_t len, char *out, size_t out_size)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t whole = 0, kept = 0; /* the cleaned length, and what of it fits out */
	bool cut = out_size == 0;

	for (size_t i = 0; i < len;) {
		char rep[8];
		const char *piece = s + i;
		uint32_t cp = 0;
		size_t n = utf8_decode(u + i, len - i, &cp), plen = n;

		if (!n) {
			piece = "\xef\xbf\xbd"; /* U+FFFD */
			plen = 3;
			n = 1;
		} else if (is_control(cp)) {
			plen = (size_t)snprintf(rep, sizeof(rep), cp < 0x80 ? "\\x%02x" : "\\u%04x",
						(unsigned)cp);
			piece = rep;
		}
		/* whole characters only: a cut never leaves half a sequence behind */
		if (!cut && whole + plen < out_size) {
			memcpy(out + whole, piece, plen);
			kept = whole + plen;
		} else {
			cut = true;
		}
		whole += plen;
		i += n;
	}
	if (out_size)
		out[kept] = '\0';
	return whole;
}

char *pp_text_clean_dup(const char *s)
{
	size_t len = strlen(s), need = pp_text_clean(s, len, NULL, 0);
	char *out = malloc(need + 1);

	if (!out) {
		errno = ENOMEM;
		return NULL;
	}
	pp_text_clean(s, len, out, need + 1);
	return out;
}

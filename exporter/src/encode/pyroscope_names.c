/*
 * Pyroscope's naming rules applied to names other processes chose (pebsprof/pyroscope.h).
 */
#include <pebsprof/profile.h>
#include <pebsprof/pyroscope.h>

#include <stdint.h>
#include <string.h>

static bool label_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.';
}

static bool service_char(unsigned char c, bool slash)
{
	return label_char(c) || c == '-' || (slash && c == '/');
}

static bool space_char(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/*
 * Bytes of the character at s (one for a byte that begins no valid sequence), so that one
 * character, as Go ranges over a string, becomes one '_'.
 */
static size_t char_len(const unsigned char *s, size_t left)
{
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 1;

	if (s[0] < 0x80 || s[0] >= 0xf8 || n > left)
		return 1;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 1;
	return n;
}

const char *pp_pyroscope_stated_service(unsigned process_kind)
{
	switch (process_kind) {
	case PP_PROCESS_KERNEL_THREAD:
		return PP_SERVICE_KERNEL_THREADS;
	case PP_PROCESS_IDLE:
		return PP_SERVICE_IDLE;
	default:
		return NULL;
	}
}

const char *pp_pyroscope_service_name(const char *name, enum pp_service_source src, char *out,
				      size_t out_size)
{
	const unsigned char *s = (const unsigned char *)(name ? name : "");
	size_t len = strlen((const char *)s), o = 0;
	bool slash = src == PP_SERVICE_CONFIGURED;

	if (out_size > PP_PYROSCOPE_NAME_MAX)
		out_size = PP_PYROSCOPE_NAME_MAX;
	while (len && space_char(s[0]))
		s++, len--;
	while (len && space_char(s[len - 1]))
		len--;
	/* "[kworker/0:1]", "[wc]": the agent's mark of a process without an executable */
	if (src == PP_SERVICE_PROCESS && len >= 2 && s[0] == '[' && s[len - 1] == ']')
		s++, len -= 2;
	for (size_t i = 0; i < len && o + 1 < out_size;) {
		size_t n = char_len(s + i, len - i);

		out[o++] = n == 1 && service_char(s[i], slash) ? (char)s[i] : '_';
		i += n;
	}
	if (!o)
		return strcpy(out, PP_SERVICE_UNKNOWN);
	out[o] = '\0';
	return out;
}

bool pp_pyroscope_service_name_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (!len || space_char((unsigned char)name[0]) || space_char((unsigned char)name[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!service_char((unsigned char)name[i], true))
			return false;
	return true;
}

size_t pp_pyroscope_label_name(const char *name, char *out, size_t out_size)
{
	const unsigned char *s = (const unsigned char *)(name ? name : "");
	size_t len = strlen((const char *)s), o = 0;

	if (!out_size)
		return 0;
	if (!len || (s[0] >= '0' && s[0] <= '9')) {
		if (o + 1 < out_size)
			out[o++] = '_';
	}
	for (size_t i = 0; i < len && o + 1 < out_size;) {
		size_t n = char_len(s + i, len - i);

		out[o++] = n == 1 && label_char(s[i]) ? (char)s[i] : '_';
		i += n;
	}
	out[o] = '\0';
	return o;
}

bool pp_pyroscope_label_name_ok(const char *name)
{
	if (!name || !name[0] || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (const char *p = name; *p; p++)
		if (!label_char((unsigned char)*p))
			return false;
	return true;
}

bool pp_pyroscope_label_names_clash(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a == '.' ? '_' : *a, y = *b == '.' ? '_' : *b;

		if (x != y)
			return false;
	}
	return *a == *b;
}

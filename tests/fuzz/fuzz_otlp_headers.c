/*
 * Fuzz target for the OTEL_EXPORTER_OTLP_HEADERS parser and the Retry-After parser: any
 * input must give either an error with a message, or headers that are safe to put on the
 * wire (token names, no control characters, no reserved names, no repeated names).
 */
#include <pebsprof/transport.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_headers(const struct pp_http_header *h, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *p;

		if (!h[i].name[0])
			abort();
		for (p = (const unsigned char *)h[i].name; *p; p++)
			if (*p <= 0x20 || *p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *p))
				abort();
		for (p = (const unsigned char *)h[i].value; *p; p++)
			if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
				abort();
		if (!strcasecmp(h[i].name, "content-type") || !strcasecmp(h[i].name, "host"))
			abort();
		for (uint32_t j = 0; j < i; j++)
			if (!strcasecmp(h[i].name, h[j].name))
				abort();
	}
	if (n > PP_TRANSPORT_MAX_HEADERS)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_http_header *h = NULL;
	uint32_t n = 0;
	char err[256];
	char *s;
	int ret;

	ret = pp_otlp_parse_headers((const char *)data, size, &h, &n, err, sizeof(err));
	if (ret == 0) {
		if ((n == 0) != (h == NULL))
			abort();
		check_headers(h, n);
	} else if ((ret != -EINVAL && ret != -E2BIG) || h || n ||
		   strncmp(err, "OTEL_EXPORTER_OTLP_HEADERS pair ", 32) != 0) {
		abort();
	}
	pp_otlp_free_headers(h);

	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (pp_transport_parse_retry_after(s, 1700000000) < -1)
		abort();
	free(s);
	return 0;
}

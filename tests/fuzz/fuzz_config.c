/*
 * Fuzz target for the `pebsprof run` configuration parsers: the config file text, the
 * k=v,... lists of OTLP headers and resource attributes, endpoint URLs, sizes with suffixes
 * and listen addresses. The first byte picks the parser so one corpus covers all of them.
 */
#define _GNU_SOURCE /* open_memstream */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The headers line of the printout must be exactly the keys with <redacted> values. */
static void check_redacted(const struct pp_run_config *c)
{
	char *out = NULL, *want = NULL, *line;
	size_t n = 0, wn = 0;
	FILE *f = open_memstream(&out, &n), *w = open_memstream(&want, &wn);

	if (!f || !w)
		abort();
	pp_run_config_print(c, f);
	fclose(f);
	fputs("\nheaders = ", w);
	for (size_t i = 0; i < c->headers.n; i++)
		fprintf(w, "%s%s=<redacted>", i ? "," : "", c->headers.items[i].key);
	if (!c->headers.n)
		fputs("\"\"", w);
	fputs("   (", w);
	fclose(w);
	line = strstr(out, "\nheaders = ");
	if (!line || strncmp(line, want, strlen(want)))
		abort();
	free(out);
	free(want);
}

static void config_file(const char *buf, size_t len)
{
	struct pp_run_config c;
	struct pp_config_errors e = {0};

	if (pp_run_config_init(&c))
		return;
	pp_config_file_parse(buf, len, "fuzz.conf", &c, &e);
	pp_run_config_finish(&c, &e);
	if (e.n > PP_CONFIG_MAX_ERRORS)
		abort();
	for (size_t i = 0; i < e.n; i++)
		if (!memchr(e.msg[i], '\0', PP_CONFIG_ERROR_LEN))
			abort();
	check_redacted(&c);
	pp_run_config_fini(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_kv_list l;
	char err[256];
	uint64_t v;
	char *buf;

	if (size < 1)
		return 0;
	/* copy without a terminator so reads past the length are caught by ASan */
	buf = malloc(size - 1 ? size - 1 : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	switch (data[0] % 5) {
	case 0:
		config_file(buf, size - 1);
		break;
	case 1:
		if (pp_kv_list_parse(buf, size - 1, data[0] & 1, &l, err, sizeof(err)) == 0) {
			for (size_t i = 0; i < l.n; i++)
				if (!l.items[i].key[0] || strpbrk(l.items[i].value, "\r\n"))
					abort();
			pp_kv_list_free(&l);
		}
		break;
	case 2:
		pp_url_check(buf, size - 1, err, sizeof(err));
		break;
	case 3:
		pp_size_parse(buf, size - 1, &v, err, sizeof(err));
		break;
	default:
		pp_listen_check(buf, size - 1, err, sizeof(err));
		break;
	}
	free(buf);
	return 0;
}

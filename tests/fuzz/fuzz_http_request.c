/*
 * Fuzz target for the health endpoint's request parser and responder: whatever the bytes,
 * the parser stays inside them and agrees with itself on the request's own head, and the
 * response is one of the statuses we serve with a Content-Length that matches its body.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/health.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_response(int ret, const struct pp_http_request *req)
{
	const struct pp_health_limits lim = {.stall_ns = 30000000000ull, .failed_windows = 3};
	struct pp_health_snapshot s = {.updated_ns = 1,
				       .progress_ns = 1,
				       .process_cache_entries = -1,
				       .symbol_cache_files = -1};
	char *out = NULL, *body, *cl;
	size_t len = 0;
	int code = pp_health_response(ret, req, &s, &lim, 2, &out, &len);

	if (code == -ENOMEM)
		return;
	if (code != 200 && code != 400 && code != 404 && code != 405 && code != 431 && code != 503)
		abort();
	if (!out || strlen(out) != len || strncmp(out, "HTTP/1.1 ", 9))
		abort();
	body = strstr(out, "\r\n\r\n");
	cl = strstr(out, "\r\nContent-Length: ");
	if (!body || !cl || cl > body)
		abort();
	if (!(ret == 0 && req->method == PP_HTTP_HEAD && (code == 200 || code == 503)) &&
	    strtoul(cl + 18, NULL, 10) != strlen(body + 4))
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct pp_http_request r, again;
	int ret;

	if (size > 2 * PP_HTTP_MAX_REQUEST)
		return 0;
	ret = pp_http_parse_request(buf, size, &r);
	if (ret != 0 && ret != -EAGAIN && ret != -EBADMSG)
		abort();
	if (ret == 0) {
		if (r.header_len > size || r.header_len < 14) /* "X / HTTP/1.0\n\n" */
			abort();
		if (r.path_len < 1 || r.path[0] != '/' || memchr(r.path, '?', r.path_len))
			abort();
		/* the path lies in the head, but for the "/" of an absolute form without one */
		if ((r.path < buf || r.path + r.path_len > buf + r.header_len) && r.path_len != 1)
			abort();
		if (r.minor != 0 && r.minor != 1)
			abort();
		/* the head alone parses the same; one byte less is incomplete */
		if (pp_http_parse_request(buf, r.header_len, &again) != 0 ||
		    again.header_len != r.header_len || again.method != r.method ||
		    again.path_len != r.path_len)
			abort();
		if (pp_http_parse_request(buf, r.header_len - 1, &again) != -EAGAIN)
			abort();
	}
	check_response(ret, &r);
	return 0;
}

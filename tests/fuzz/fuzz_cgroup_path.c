/*
 * Fuzz target for the cgroup path parser: any bytes must give -EINVAL, 0 or 1 without reading
 * past the buffer; a found container has a 64-lowercase-hex ID and a runtime; a pod UID is
 * always a dashed UUID; and prefixing "/.." (how a path looks from a cgroup namespace below
 * the root) never changes the answer, since the parser looks only at components it knows.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/cgroup_path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static void check_ref(int rc, const struct pp_container_ref *r)
{
	size_t n;

	if (rc != 1 && rc != 0 && rc != -EINVAL)
		abort();
	if (r->runtime > PP_RUNTIME_UNKNOWN || r->qos > PP_QOS_BESTEFFORT)
		abort();
	n = strnlen(r->id, sizeof(r->id));
	if (rc == 1) {
		if (n != 64 || r->runtime == PP_RUNTIME_NONE)
			abort();
		for (size_t i = 0; i < n; i++)
			if (!is_lower_hex(r->id[i]))
				abort();
	} else if (n != 0 || r->runtime != PP_RUNTIME_NONE) {
		abort();
	}
	n = strnlen(r->pod_uid, sizeof(r->pod_uid));
	if (n != 0 && n != 36)
		abort();
	if (n == 0 && r->qos != PP_QOS_NONE)
		abort();
	for (size_t i = 0; i < n; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? r->pod_uid[i] != '-' : !is_lower_hex(r->pod_uid[i]))
			abort();
	}
	if (rc == -EINVAL && (r->pod_uid[0] || r->qos != PP_QOS_NONE))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_container_ref a, b;
	char *copy, *pre;
	int rc, rc2;

	/* An exact-size copy so a read past size is caught by ASan. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	rc = pp_cgroup_path_parse(copy, size, &a);
	check_ref(rc, &a);

	if (rc >= 0) {
		pre = malloc(size + 4);
		if (!pre)
			abort();
		memcpy(pre, "/../", 4);
		memcpy(pre + 4, data, size);
		rc2 = pp_cgroup_path_parse(pre, size + 4, &b);
		check_ref(rc2, &b);
		if (size + 4 <= PP_CGROUP_PATH_MAX + (data[size - 1] == '\n') &&
		    (rc2 != rc || memcmp(&a, &b, sizeof(a)) != 0))
			abort();
		free(pre);
	}
	free(copy);
	return 0;
}

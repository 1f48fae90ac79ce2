/*
 * Unit tests of Pyroscope's naming rules (pebsprof/pyroscope.h) on the names a node gives:
 * kernel threads, the idle task, executables whose names hold '+', ':' or non-ASCII, comm
 * set to anything by a hostile process (brackets, braces, commas, '=', spaces, control
 * bytes, invalid UTF-8), and configured names with '/'. Each result is checked against an
 * independent reading of labelset.Parse (validate.go's rune classes, TrimSpace, '{' ending
 * the name): it must be accepted, and equal to what the rules say it should be.
 */
#include <pebsprof/pyroscope.h>

#include "check.h"

#include <stdbool.h>
#include <string.h>

/*
 * labelset.Parse(name + "{}") as Pyroscope runs it: the service name is everything before
 * the first '{', trimmed; it must be non-empty with every rune in [A-Za-z0-9_.\-/].
 */
static bool labelset_parse_accepts(const char *name)
{
	const char *end = strchr(name, '{');
	size_t len = end ? (size_t)(end - name) : strlen(name);

	while (len && (*name == ' ' || (*name >= '\t' && *name <= '\r')))
		name++, len--;
	while (len && (name[len - 1] == ' ' || (name[len - 1] >= '\t' && name[len - 1] <= '\r')))
		len--;
	if (!len)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-' || c == '/'))
			return false;
	}
	return true;
}

struct name_case {
	const char *in;
	enum pp_service_source src;
	const char *want;
	bool raw_ok; /* Pyroscope takes the raw name, but not as what it is (labels, ours) */
};

TEST(service_names_of_a_node)
{
	static const struct name_case cases[] = {
	    {"python3.11", PP_SERVICE_PROCESS, "python3.11", false},
	    {"x86_64-linux-gnu-g++-12", PP_SERVICE_PROCESS, "x86_64-linux-gnu-g__-12", false},
	    {"[wc]", PP_SERVICE_PROCESS, "wc", false},
	    {"[kworker/0:2-virtio_vsock]", PP_SERVICE_PROCESS, "kworker_0_2-virtio_vsock", false},
	    {"memfd:sealed-\xe2\x80\xa6", PP_SERVICE_PROCESS, "memfd_sealed-_", false},
	    {"caf\xc3\xa9", PP_SERVICE_PROCESS, "caf_", false},
	    {"bad\xff\xfe", PP_SERVICE_PROCESS, "bad__", false},
	    {"  spaced out \t", PP_SERVICE_PROCESS, "spaced_out", false},
	    {"evil{a=b,c=d}", PP_SERVICE_PROCESS, "evil_a_b_c_d_", true},
	    {"kernel/threads", PP_SERVICE_PROCESS, "kernel_threads", true},
	    {"tab\there\x01", PP_SERVICE_PROCESS, "tab_here_", false},
	    {"", PP_SERVICE_PROCESS, "unknown_service", false},
	    {"[]", PP_SERVICE_PROCESS, "unknown_service", false},
	    {"   ", PP_SERVICE_CONFIGURED, "unknown_service", false},
	    {"shop/checkout", PP_SERVICE_CONFIGURED, "shop/checkout", false},
	    {"my service", PP_SERVICE_CONFIGURED, "my_service", false},
	    {"[configured]", PP_SERVICE_CONFIGURED, "_configured_", false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[PP_PYROSCOPE_NAME_MAX];
		const char *got =
		    pp_pyroscope_service_name(cases[i].in, cases[i].src, out, sizeof(out));

		CHECK_STR(got, cases[i].want);
		CHECK(labelset_parse_accepts(got));
		CHECK(pp_pyroscope_service_name_ok(got));
		/* What the agent pushed before: the raw name, refused unless already clean. */
		CHECK(labelset_parse_accepts(cases[i].in) ==
		      (cases[i].raw_ok || strcmp(cases[i].in, got) == 0));
	}
	CHECK(labelset_parse_accepts(PP_SERVICE_KERNEL_THREADS));
	CHECK(labelset_parse_accepts(PP_SERVICE_IDLE));
	CHECK(labelset_parse_accepts(PP_SERVICE_UNKNOWN));
}

TEST(service_names_are_bounded)
{
	char in[4096], out[PP_PYROSCOPE_NAME_MAX], small[16];

	memset(in, 'a', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	pp_pyroscope_service_name(in, PP_SERVICE_PROCESS, out, sizeof(out));
	CHECK_EQ_U64(strlen(out), PP_PYROSCOPE_NAME_MAX - 1);
	pp_pyroscope_service_name(in, PP_SERVICE_PROCESS, small, sizeof(small));
	CHECK_EQ_U64(strlen(small), sizeof(small) - 1);
	/* a multi-byte character near the end is one '_', never half of it */
	memcpy(in + 13, "\xe2\x80\xa6", 4);
	pp_pyroscope_service_name(in, PP_SERVICE_PROCESS, small, sizeof(small));
	CHECK_STR(small, "aaaaaaaaaaaaa_");
}

TEST(label_names)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"thread_name", "thread_name"},
	    {"memory.level", "memory.level"},
	    {"app.kubernetes.io/part-of", "app.kubernetes.io_part_of"},
	    {"2fa", "_2fa"},
	    {"", "_"},
	    {"\xc3\xa9t\xc3\xa9", "_t_"},
	    {"a=b,c}", "a_b_c_"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[64];

		pp_pyroscope_label_name(cases[i].in, out, sizeof(out));
		CHECK_STR(out, cases[i].want);
		CHECK(pp_pyroscope_label_name_ok(out));
		CHECK(pp_pyroscope_label_name_ok(cases[i].in) == !strcmp(cases[i].in, out));
	}
	CHECK(pp_pyroscope_label_names_clash("k8s.pod.name", "k8s_pod_name"));
	CHECK(pp_pyroscope_label_names_clash("a.b", "a.b"));
	CHECK(!pp_pyroscope_label_names_clash("a.b", "a.bc"));
	CHECK(!pp_pyroscope_label_names_clash("a_b", "a-b"));
}

TEST_LIST = {
    {"service_names_of_a_node", service_names_of_a_node},
    {"service_names_are_bounded", service_names_are_bounded},
    {"label_names", label_names},
};

TEST_MAIN()

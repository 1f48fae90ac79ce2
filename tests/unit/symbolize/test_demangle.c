/*
 * Tests of symbol demangling: C++ names as the Itanium ABI mangles them (functions, methods,
 * templates, operators, a clone suffix) come out as perf prints them; C names, names that only
 * look mangled, and names whose demangled form does not fit are returned unchanged.
 */
#include <string.h>

#include "check.h"
#include "symbolize/demangle.h"

static const char *dm(const char *name, char *buf, size_t len)
{
	return pp_demangle(name, buf, len);
}

TEST(cxx_names)
{
	char buf[512];

	if (!pp_demangle_available())
		SKIP("no C++ runtime (libstdc++.so.6) with __cxa_demangle on this machine");
	CHECK_STR(dm("_ZN3foo3barEv", buf, sizeof(buf)), "foo::bar()");
	CHECK_STR(dm("_ZN6fuzzer6Fuzzer6RunOneEPKhmbPNS_9InputInfoEbPb", buf, sizeof(buf)),
		  "fuzzer::Fuzzer::RunOne(unsigned char const*, unsigned long, bool, "
		  "fuzzer::InputInfo*, bool, bool*)");
	CHECK_STR(dm("_ZNSt6vectorIiSaIiEE9push_backERKi", buf, sizeof(buf)),
		  "std::vector<int, std::allocator<int> >::push_back(int const&)");
	CHECK_STR(dm("_ZplRK1AS1_", buf, sizeof(buf)), "operator+(A const&, A const&)");
	CHECK_STR(dm("_Z3fooi.cold", buf, sizeof(buf)), "foo(int) [clone .cold]");
	/* A C++ global (data symbol). */
	CHECK_STR(dm("_ZN5cache5tableE", buf, sizeof(buf)), "cache::table");
}

TEST(left_alone)
{
	char buf[64];
	const char *c_name = "burn_alpha", *not_mangled = "_Zebra", *plain_type = "i";

	CHECK(dm(c_name, buf, sizeof(buf)) == c_name);
	CHECK(dm(not_mangled, buf, sizeof(buf)) == not_mangled);
	CHECK(dm(plain_type, buf, sizeof(buf)) == plain_type);
	CHECK(dm("", buf, sizeof(buf))[0] == '\0');
	CHECK(dm(NULL, buf, sizeof(buf)) == NULL);
	/* Too long for the buffer: the mangled name, never a cut one. */
	const char *longer = "_ZN6fuzzer6Fuzzer6RunOneEPKhmbPNS_9InputInfoEbPb";
	CHECK(dm(longer, buf, 16) == longer);
}

TEST_LIST = {
    {"cxx_names", cxx_names},
    {"left_alone", left_alone},
};
TEST_MAIN()

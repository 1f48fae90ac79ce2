/*
 * Tests of symbol demangling (libiberty): C++ names as the Itanium ABI mangles them
 * (functions, methods, templates, operators, a clone suffix) and Rust's legacy and v0 names come
 * out as perf and pprof show them, without parameter lists and without Rust's hash; C names,
 * names that only look mangled, and names whose demangled form does not fit are returned
 * unchanged. The expected forms are c++filt's (binutils) without its parameter lists.
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

	CHECK_STR(dm("_ZN3foo3barEv", buf, sizeof(buf)), "foo::bar");
	CHECK_STR(dm("_ZN6fuzzer6Fuzzer6RunOneEPKhmbPNS_9InputInfoEbPb", buf, sizeof(buf)),
		  "fuzzer::Fuzzer::RunOne");
	CHECK_STR(dm("_ZNSt6vectorIiSaIiEE9push_backERKi", buf, sizeof(buf)),
		  "std::vector<int, std::allocator<int> >::push_back");
	CHECK_STR(dm("_Z14bitmap_set_bitP18simple_bitmap_defi", buf, sizeof(buf)),
		  "bitmap_set_bit");
	CHECK_STR(dm("_ZplRK1AS1_", buf, sizeof(buf)), "operator+");
	CHECK_STR(dm("_ZN3FooC1Ev", buf, sizeof(buf)), "Foo::Foo");
	/* A C++ global (data symbol), and a function's static. */
	CHECK_STR(dm("_ZN5cache5tableE", buf, sizeof(buf)), "cache::table");
	CHECK_STR(dm("_ZZN3foo3barEvE1x", buf, sizeof(buf)), "foo::bar()::x");
}

TEST(rust_names)
{
	char buf[512];

	/* v0: the crate disambiguator and generic arguments as rustc-demangle prints them */
	CHECK_STR(dm("_RNvNtCsalM65ksrrJu_3std2rt19lang_start_internal", buf, sizeof(buf)),
		  "std::rt::lang_start_internal");
	CHECK_STR(dm("_RNvCs1234_7mycrate3fib", buf, sizeof(buf)), "mycrate::fib");
	/* legacy: $LT$ and friends undone, the 17h... hash cut */
	CHECK_STR(
	    dm("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$"
	       "closure$u7d$$u7d$$GT$17h0b1a2c3d4e5f6a7bE",
	       buf, sizeof(buf)),
	    "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>");
	CHECK_STR(dm("_ZN7mycrate8map_work17h5a3b1c9d8e7f6a2bE", buf, sizeof(buf)),
		  "mycrate::map_work");
}

TEST(left_alone)
{
	char buf[64];
	const char *c_name = "burn_alpha", *not_mangled = "_Zebra", *plain_type = "i";
	const char *not_v0 = "_Rubbish";

	CHECK(pp_demangle_available());
	CHECK(dm(c_name, buf, sizeof(buf)) == c_name);
	CHECK(dm(not_mangled, buf, sizeof(buf)) == not_mangled);
	CHECK(dm(plain_type, buf, sizeof(buf)) == plain_type);
	CHECK(dm(not_v0, buf, sizeof(buf)) == not_v0);
	CHECK(dm("", buf, sizeof(buf))[0] == '\0');
	CHECK(dm(NULL, buf, sizeof(buf)) == NULL);
	/* Too long for the buffer: the mangled name, never a cut one. */
	const char *longer = "_ZNSt6vectorIiSaIiEE9push_backERKi";
	CHECK(dm(longer, buf, 16) == longer);
}

TEST_LIST = {
    {"cxx_names", cxx_names},
    {"rust_names", rust_names},
    {"left_alone", left_alone},
};
TEST_MAIN()

/*
 * Demangling with libiberty's cplus_demangle, the demangler of binutils, GDB and perf: the
 * Itanium C++ ABI, Rust's legacy scheme (its hash cut) and Rust's v0 scheme. Names are shown
 * the way perf and pprof show them, without parameter lists: "std::vector<int,
 * std::allocator<int> >::push_back", not "...::push_back(int const&)". The mangled name stays
 * the symbol's system name in the profiles.
 */
#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

int pp_demangle_available(void)
{
	return 1;
}

/* Only mangled-looking names are handed over: "_Z..." (C++, Rust legacy) and "_R..." (v0). */
static int looks_mangled(const char *name)
{
	return name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
}

const char *pp_demangle(const char *name, char *out, size_t outlen)
{
	char *d;
	size_t n;

	if (!name || !out || !outlen || !looks_mangled(name))
		return name;
	/* DMGL_AUTO picks the scheme; no DMGL_PARAMS: function names without their arguments */
	d = cplus_demangle(name, DMGL_AUTO);
	if (!d)
		return name;
	n = strlen(d);
	if (n >= outlen) {
		free(d);
		return name;
	}
	memcpy(out, d, n + 1);
	free(d);
	return out;
}

/*
 * Demangling through the C++ runtime's __cxa_demangle, looked up with dlopen so the profiler
 * has no link-time dependency on it. Only "_Z" names are handed over: the demangler also
 * accepts plain type names ("i" -> "int"), which a C symbol like "i" must not turn into.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static cxa_demangle_fn demangler;
static pthread_once_t demangler_once = PTHREAD_ONCE_INIT;

static void load_demangler(void)
{
	/* Already in the process (a C++ program linked us), else the system's runtime. */
	void *sym = dlsym(RTLD_DEFAULT, "__cxa_demangle");

	if (!sym) {
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);

		if (h)
			sym = dlsym(h, "__cxa_demangle");
	}
	demangler = (cxa_demangle_fn)sym;
}

int pp_demangle_available(void)
{
	pthread_once(&demangler_once, load_demangler);
	return demangler != NULL;
}

const char *pp_demangle(const char *name, char *out, size_t outlen)
{
	char *d;
	int status = -1;
	size_t n;

	if (!name || name[0] != '_' || name[1] != 'Z' || !out || !outlen)
		return name;
	if (!pp_demangle_available())
		return name;
	d = demangler(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
	n = strlen(d);
	if (n >= outlen) {
		free(d);
		return name;
	}
	memcpy(out, d, n + 1);
	free(d);
	return out;
}

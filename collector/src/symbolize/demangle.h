/*
 * C++ (and legacy Rust) symbol names made readable, as perf shows them: "_ZN3foo3barEv" ->
 * "foo::bar()". Uses the Itanium ABI demangler of the C++ runtime (__cxa_demangle in
 * libstdc++), loaded when first needed: nothing is linked, and where the runtime is absent
 * names stay mangled.
 */
#ifndef PP_COLLECTOR_DEMANGLE_H
#define PP_COLLECTOR_DEMANGLE_H

#include <stddef.h>

/*
 * Writes the demangled form of name to out and returns out, or returns name itself when it
 * is not a mangled name, cannot be demangled, does not fit in outlen, or no demangler is
 * available. Thread-safe.
 */
const char *pp_demangle(const char *name, char *out, size_t outlen);

/* Whether a demangler was found (tests skip when it was not). */
int pp_demangle_available(void);

#endif /* PP_COLLECTOR_DEMANGLE_H */

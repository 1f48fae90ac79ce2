/*
 * Go's function table (.gopclntab), which every Go binary keeps for its own runtime (stack
 * traces, the garbage collector), stripped or not: the functions' entry addresses and names
 * for Go binaries without a .symtab (go build -ldflags=-s, or strip). Formats of Go 1.2 to 1.15
 * (magic 0xfffffffb), 1.16/1.17 (0xfffffffa), 1.18/1.19 (0xfffffff0) and 1.20 on
 * (0xfffffff1). Parsed from bytes the caller read, each offset checked against their length.
 */
#ifndef PP_COLLECTOR_GO_PCLNTAB_H
#define PP_COLLECTOR_GO_PCLNTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At most this many functions (kubelet has about 60,000). */
#define PP_GOPCLN_MAX_FUNCS (4u << 20)

struct pp_gopcln {
	const uint8_t *b; /* the section's bytes */
	size_t len;
	bool big_endian;
	int version; /* 12 (1.2 to 1.15), 116, 118 (1.18, 1.19) or 120 */
	uint8_t ptrsize;
	uint64_t nfunc;
	uint64_t text_start;   /* 1.18 on: the address function offsets count from */
	uint64_t funcname_off; /* where names live (from the section start) */
	uint64_t functab_off;  /* the function table (from the section start) */
};

/* The header of the section's len bytes: 0, -ENOEXEC (no Go table), -EINVAL (corrupt). */
int pp_gopcln_open(struct pp_gopcln *t, const uint8_t *b, size_t len, bool big_endian);

/*
 * Function i (< t->nfunc): its entry address, where the next one starts (its end), and its
 * name's offset from the section start (NUL-terminated there). 0 or -EINVAL.
 */
int pp_gopcln_func(const struct pp_gopcln *t, uint64_t i, uint64_t *entry, uint64_t *end,
		   uint64_t *name_off);

#endif /* PP_COLLECTOR_GO_PCLNTAB_H */

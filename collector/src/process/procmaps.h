/*
 * Parser for the text of /proc/PID/maps and address lookup in the result. The symbolizer uses
 * it to turn a sampled instruction pointer into (file, file offset); the process cache keeps
 * one parsed table per process.
 */
#ifndef PP_COLLECTOR_PROCMAPS_H
#define PP_COLLECTOR_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>

/* Permission bits of a mapping, from the "rwxp" column. PP_MAP_SHARED is the 's' form. */
#define PP_MAP_READ 0x1
#define PP_MAP_WRITE 0x2
#define PP_MAP_EXEC 0x4
#define PP_MAP_SHARED 0x8

/* What the path column names. */
enum pp_map_kind {
	PP_MAP_KIND_ANON = 0, /* no path, or "[anon:name]" / "[anon_shmem:name]" */
	PP_MAP_KIND_FILE,     /* an absolute path (memfd files included: "/memfd:x") */
	PP_MAP_KIND_HEAP,     /* "[heap]" */
	PP_MAP_KIND_STACK,    /* "[stack]" (and old kernels' "[stack:TID]") */
	PP_MAP_KIND_VDSO,     /* "[vdso]" */
	PP_MAP_KIND_VVAR,     /* "[vvar]", "[vvar_vclock]" */
	PP_MAP_KIND_VSYSCALL, /* "[vsyscall]" */
	PP_MAP_KIND_OTHER,    /* any other pseudo name ("[uprobes]", "anon_inode:...") */
};

struct pp_map_entry {
	uint64_t start;	 /* first address */
	uint64_t end;	 /* one past the last address; start < end always holds */
	uint64_t offset; /* file offset of start (page offset for anonymous mappings) */
	uint64_t inode;
	uint64_t ino_generation; /* the side-band's (0: unknown, as in /proc/PID/maps) */
	uint8_t from_sideband;	 /* reported by the kernel's side-band, not read from maps */
	uint32_t dev_major;
	uint32_t dev_minor;
	uint8_t perms;	 /* PP_MAP_* bits */
	uint8_t deleted; /* the path ended in " (deleted)"; the suffix is not part of path */
	uint8_t kind;	 /* enum pp_map_kind */
	/*
	 * NUL-terminated; "" for an anonymous mapping. The kernel writes a newline in a file name
	 * as the escape "\012"; it is turned back into '\n' here so the path opens the file.
	 * Borrowed from the struct pp_maps it belongs to: valid until pp_maps_fini().
	 */
	const char *path;
};

struct pp_maps {
	struct pp_map_entry *entries; /* sorted by start, non-overlapping */
	size_t n;
	/*
	 * Lines that did not parse (or overlapped an earlier mapping) and were skipped: one odd
	 * line loses only itself.
	 */
	size_t bad_lines;
	/* The input was not in ascending address order (the kernel's order) and was sorted. */
	uint8_t resorted;
	char *strings; /* owns every entries[i].path */
	/*
	 * Room: entries for cap, strings for strings_cap bytes of which strings_len are taken
	 * (pp_maps_insert appends to them; paths it cut away stay until the strings move).
	 */
	size_t cap, strings_len, strings_cap;
};

/*
 * Parse len bytes of maps text. buf need not be NUL-terminated and is never read past len; the
 * last line may lack its newline. On success returns 0 and fills *out (which the caller later
 * releases with pp_maps_fini), including for empty input (n == 0). Returns -EINVAL on NULL
 * arguments, -ENOMEM when allocation fails; *out is then empty and needs no fini (calling it is
 * harmless).
 */
int pp_maps_parse(const char *buf, size_t len, struct pp_maps *out);

/* Release what pp_maps_parse allocated and empty *m. NULL, or an empty m, is a no-op. */
void pp_maps_fini(struct pp_maps *m);

/*
 * The mapping containing addr (start <= addr < end), found by binary search, or NULL. The
 * pointer is borrowed from m and valid until pp_maps_fini(m).
 */
const struct pp_map_entry *pp_maps_find(const struct pp_maps *m, uint64_t addr);

/*
 * Set e's kind, path and deleted flag from a mapping's name as the kernel's perf side-band
 * (PERF_RECORD_MMAP2) reports it: a path (" (deleted)" cut off), a pseudo name ("[vdso]",
 * "[heap]"), or "//anon" for anonymous memory (path ""). The suffix is cut off in name itself;
 * the path points into name, or at a static "". Other fields of e are left alone.
 */
void pp_map_entry_set_name(struct pp_map_entry *e, char *name);

/*
 * Insert mapping e (e->path copied) into m, keeping m sorted and non-overlapping: what e
 * covers of older mappings is cut away, as a new mmap replaces what it covers in the
 * process. Entries and paths handed out from m before are invalid afterwards. 0 or -ENOMEM
 * (m unchanged), -EINVAL for an empty range.
 */
int pp_maps_insert(struct pp_maps *m, const struct pp_map_entry *e);

/* A deep copy of src into *dst (which need not be initialised): 0 or -ENOMEM (dst empty). */
int pp_maps_copy(struct pp_maps *dst, const struct pp_maps *src);

/* Bytes m holds on the heap (entries and paths), for cache accounting. */
size_t pp_maps_bytes(const struct pp_maps *m);

/* The file offset that addr (inside e) corresponds to. */
static inline uint64_t pp_map_file_offset(const struct pp_map_entry *e, uint64_t addr)
{
	return addr - e->start + e->offset;
}

#endif /* PP_COLLECTOR_PROCMAPS_H */

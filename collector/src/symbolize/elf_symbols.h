/*
 * Symbol tables of ELF files (executables, shared libraries, 32- and 64-bit), read with libelf:
 * the GNU build id, function symbols and data objects sorted by address, and the PT_LOAD
 * segments that turn a file offset seen in /proc/PID/maps into an ELF virtual address. A table
 * is immutable once built and keeps no file open, so the symbol cache can share it.
 */
#ifndef PP_COLLECTOR_ELF_SYMBOLS_H
#define PP_COLLECTOR_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A build id note holds at most this many bytes here (SHA-1 is 20; longer ids are cut). */
#define PP_BUILD_ID_MAX_BYTES 64
/* Room for the lower-case hex form and its NUL. */
#define PP_BUILD_ID_HEX_SIZE (2 * PP_BUILD_ID_MAX_BYTES + 1)

/* Segment permission bits (the ELF PF_* values). */
#define PP_ELF_SEG_X 0x1
#define PP_ELF_SEG_W 0x2
#define PP_ELF_SEG_R 0x4

/* One PT_LOAD program header. */
struct pp_elf_segment {
	uint64_t vaddr;
	uint64_t memsz;
	uint64_t offset; /* file offset */
	uint64_t filesz;
	uint32_t flags; /* PP_ELF_SEG_* */
};

/* One symbol as the tables keep it: [start, end) is what lookups match. */
struct pp_elf_symbol {
	uint64_t start;
	uint64_t end; /* start + st_size, or the next symbol / section end for zero-size ones */
	const char *name;
};

struct pp_elf_symbols;

/* Where a table's function and data symbols came from. */
enum pp_symbol_source {
	PP_SYMBOLS_NONE = 0,   /* the file has none */
	PP_SYMBOLS_SYMTAB,     /* its own .symtab (not stripped) */
	PP_SYMBOLS_DYNSYM,     /* only its .dynsym: exported names */
	PP_SYMBOLS_DEBUG_FILE, /* the .symtab of a separate debug file found on disk */
	PP_SYMBOLS_DEBUGINFOD, /* ... of one a debuginfod server gave */
	PP_SYMBOLS_NOT_READ,   /* opened with PP_ELF_OPEN_NO_SYMBOLS */
	PP_SYMBOLS_GOPCLNTAB,  /* a Go binary's .gopclntab (no .symtab) */
};

/* The bound of a table opened without one (pp_elf_symbols_open_fd, _path, _mem). */
#define PP_ELF_SYMBOLS_MAX_BYTES_DEFAULT ((size_t)256 << 20)

/* Flags of pp_elf_symbols_open_fd_flags. */
/* Build id, segments and debuglink only: no symbol is read (--symbolize none). */
#define PP_ELF_OPEN_NO_SYMBOLS 0x1u

/*
 * Build the table of the ELF file at path / behind fd (the fd is read with pread-style access
 * and not closed; its offset is not used) / in len bytes at buf (copied, so buf may be freed
 * after the call). On failure return NULL with errno set:
 *   ENOEXEC  not an ELF file (bad magic, class, version, too short for a header);
 *   EINVAL   an ELF header whose program or section headers, or symbol / string tables, lie
 *            outside the file (truncated or corrupt);
 *   EFBIG    a header or table over a cap, or a table over its byte bound;
 *   ENXIO    a table claimed where a sparse file has a hole;
 *   ENOMEM, or the errno of open(2) / fstat(2) for a path.
 * An ELF file with no symbols at all is not an error: it yields empty tables.
 */
struct pp_elf_symbols *pp_elf_symbols_open_path(const char *path);
struct pp_elf_symbols *pp_elf_symbols_open_fd(int fd);
struct pp_elf_symbols *pp_elf_symbols_open_mem(const void *buf, size_t len);
/* pp_elf_symbols_open_fd with PP_ELF_OPEN_* flags. */
struct pp_elf_symbols *pp_elf_symbols_open_fd_flags(int fd, unsigned int flags);
/*
 * The same within max_bytes (pp_elf_symbols_bytes of the result; 0: the default): reading stops
 * with EFBIG as soon as the table would be larger, so building one costs about what it keeps
 * and never more than a few times the bound, whatever the file claims. The file's headers are
 * checked first (base/elf_read.h): EFBIG for claims over the fixed caps, ENXIO for bytes
 * claimed in a hole of a sparse file.
 */
struct pp_elf_symbols *pp_elf_symbols_open_fd_limited(int fd, unsigned int flags, size_t max_bytes);

/*
 * Tables are reference-counted, so the thread that builds and caches them and the thread that
 * names frames with them can share one: a new table holds one reference, pp_elf_symbols_ref
 * adds one (returns s), pp_elf_symbols_free drops one and frees the table with the last. NULL
 * is a no-op for both. A table is never changed once another thread holds it.
 */
struct pp_elf_symbols *pp_elf_symbols_ref(struct pp_elf_symbols *s);
void pp_elf_symbols_free(struct pp_elf_symbols *s);

/*
 * A number no other table of this process had or will have (1, 2, ...; 0 for NULL): what
 * names a table in caches that outlive it, where its address could be a later table's.
 */
uint64_t pp_elf_symbols_serial(const struct pp_elf_symbols *s);

/*
 * Read only the build id of the ELF file behind fd (cheaper than building the table: notes
 * only). Writes the lower-case hex id, or "" when the file has none, into out (out_size >= 1).
 * Returns 0, -ENOEXEC / -EINVAL as above, or -ENOSPC when out is too small for the id.
 */
int pp_elf_read_build_id_fd(int fd, char *out, size_t out_size);

/* The memory s holds, in bytes: what a cache bounded in bytes counts. */
size_t pp_elf_symbols_bytes(const struct pp_elf_symbols *s);

/* The lower-case hex GNU build id, "" when the file has none. Borrowed from s. */
const char *pp_elf_symbols_build_id(const struct pp_elf_symbols *s);

/*
 * The name of the function symbol covering vaddr (an ELF virtual address, see
 * pp_elf_file_offset_to_vaddr), or NULL when none does (before the first symbol, in padding
 * between functions, past the end). *sym_start (may be NULL) gets the symbol's address, so
 * vaddr - *sym_start is the offset into the function. The name is borrowed from s.
 */
const char *pp_elf_symbols_lookup(const struct pp_elf_symbols *s, uint64_t vaddr,
				  uint64_t *sym_start);

/*
 * Same for data objects (STT_OBJECT in allocated, non-executable sections: .data, .bss,
 * .rodata, ...). Thread-local variables (STT_TLS) are placed at the address of their
 * initialisation image (PT_TLS p_vaddr + st_value), so a data address resolves to them only
 * inside .tdata/.tbss.
 */
const char *pp_elf_symbols_lookup_data(const struct pp_elf_symbols *s, uint64_t vaddr,
				       uint64_t *sym_start);

/*
 * Translate a file offset into the ELF virtual address it is loaded at: for a sampled address
 * addr in a mapping {start, offset} of this file, file_offset = addr - start + offset. The
 * PT_LOAD segment whose file bytes contain file_offset decides (an executable one wins when
 * two claim it; a segment's zero-filled tail past p_filesz is tried last). Returns 0 and sets
 * *vaddr, or -ENOENT when no segment contains the offset.
 */
int pp_elf_file_offset_to_vaddr(const struct pp_elf_symbols *s, uint64_t file_offset,
				uint64_t *vaddr);

/* pp_elf_file_offset_to_vaddr(s, addr - map_start + map_offset, vaddr), range-checked. */
int pp_elf_symbols_map_addr(const struct pp_elf_symbols *s, uint64_t addr, uint64_t map_start,
			    uint64_t map_offset, uint64_t *vaddr);

/* Function symbols, sorted by start, deduplicated (one name per address). Borrowed from s. */
size_t pp_elf_symbols_count(const struct pp_elf_symbols *s);
const struct pp_elf_symbol *pp_elf_symbols_get(const struct pp_elf_symbols *s, size_t i);
/* Data symbols, likewise. */
size_t pp_elf_symbols_data_count(const struct pp_elf_symbols *s);
const struct pp_elf_symbol *pp_elf_symbols_data_get(const struct pp_elf_symbols *s, size_t i);

/* The PT_LOAD segments in program header order. */
size_t pp_elf_symbols_segment_count(const struct pp_elf_symbols *s);
const struct pp_elf_segment *pp_elf_symbols_segment(const struct pp_elf_symbols *s, size_t i);

/* ELFCLASS32 or ELFCLASS64 (1 or 2); e_type (ET_EXEC = 2, ET_DYN = 3, ...). */
int pp_elf_symbols_class(const struct pp_elf_symbols *s);
int pp_elf_symbols_type(const struct pp_elf_symbols *s);

/* Whether the file had a .symtab (not stripped): without it only .dynsym names are known. */
int pp_elf_symbols_has_symtab(const struct pp_elf_symbols *s);

/*
 * The file name in .gnu_debuglink when the file has no .symtab (where separate debug info
 * would be), "" otherwise; a name holding '/' is ignored, so it can only name a file in the
 * directories debug_file.h searches.
 */
const char *pp_elf_symbols_debuglink(const struct pp_elf_symbols *s);
/* The CRC-32 the debuglink asks of its file: 0 and *crc, or -ENOENT when there is none. */
int pp_elf_symbols_debuglink_crc(const struct pp_elf_symbols *s, uint32_t *crc);

/* Where the table's symbols came from, and its short name ("symtab", "debug_file", ...). */
enum pp_symbol_source pp_elf_symbols_source(const struct pp_elf_symbols *s);
const char *pp_symbol_source_name(enum pp_symbol_source src);

/*
 * Whether a and b name every address alike: the same build id, debuglink, source, segments
 * and symbols (each one's extent and name). Two files claiming one build id are only the same
 * binary where this holds (the symbol cache shares a table between copies only then).
 */
bool pp_elf_symbols_same(const struct pp_elf_symbols *a, const struct pp_elf_symbols *b);

/*
 * Give dst the symbols of debug, the separate debug file of the same binary, and free debug
 * (on success only): dst keeps its own segments, build id and class, so addresses still map
 * through the mapped file, and the debug file's .symtab names them (a debug file holds the
 * same virtual addresses as its binary). dst's source becomes source. Returns 0, -ESTALE when
 * both have build ids and they differ, -ENOENT when debug has no .symtab, -EINVAL for NULL.
 */
int pp_elf_symbols_adopt(struct pp_elf_symbols *dst, struct pp_elf_symbols *debug,
			 enum pp_symbol_source source);

/*
 * A table as bytes, for the symbol table cache (symbol_store.h). The format is little-endian;
 * only the agent writes it, in its own directory, so it is checked for sense when read back,
 * not sealed. pp_elf_symbols_encoded_len: its length, 0 for a table whose names are not all
 * its own (none built here is such).
 */
size_t pp_elf_symbols_encoded_len(const struct pp_elf_symbols *s);
/* The bytes in *out (malloc'ed, the caller's) of *len bytes: 0, -ENOMEM, or -EINVAL (see above). */
int pp_elf_symbols_encode(const struct pp_elf_symbols *s, void **out, size_t *len);
/*
 * The same bytes written to fd, without a copy of the table in memory: 0, -EINVAL (see
 * above), -ENOMEM or the write's -errno (fd then holds part of them).
 */
int pp_elf_symbols_write(const struct pp_elf_symbols *s, int fd);
/*
 * The table of pp_elf_symbols_encode's bytes, checked whole: its size what its counts say,
 * every name inside the table's own and ended there, each symbol's extent ordered and the
 * symbols sorted, the build id hex. NULL with errno EPROTO (another format), EBADMSG (torn,
 * altered or inconsistent), EFBIG (over max_bytes of pp_elf_symbols_bytes; 0: no bound) or
 * ENOMEM. With map (the read-only mapping of map_len bytes that holds buf), decoding takes
 * map whatever comes of it: the table's names stay where they lie (no copy, and only the
 * pages of names asked for are read), the mapping unmapped when the table is freed (the bytes
 * before its names counted as the table's); unmapped on failure. Without (NULL), names are
 * copied.
 */
struct pp_elf_symbols *pp_elf_symbols_decode(const void *buf, size_t len, size_t max_bytes,
					     void *map, size_t map_len);

#endif /* PP_COLLECTOR_ELF_SYMBOLS_H */

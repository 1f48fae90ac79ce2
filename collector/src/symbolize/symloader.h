/*
 * Symbol tables loaded off the sample path. Opening a file another process named and reading
 * its tables is the agent's most exposed work: a FUSE file can block an open forever, and a
 * big or hostile table costs time however well it is bounded. So one worker thread owns the
 * symbol cache and does all of it: it opens each mapping's file the safe way
 * (process/mapped_file.h), reads its tables within the cache's bounds (symcache.h), finds its
 * debug file; and the thread that drains the ring buffer only queues requests and takes
 * results, never waiting on a file.
 *
 * Requests and results are matched by a tag the caller chooses. A result's table is a
 * reference the taker owns (pp_elf_symbols_free drops it), valid however the cache evicts.
 */
#ifndef PP_COLLECTOR_SYMLOADER_H
#define PP_COLLECTOR_SYMLOADER_H

#include <stddef.h>
#include <stdint.h>

#include "data_type.h"
#include "debug_file.h"
#include "elf_symbols.h"
#include "kernel_image.h"
#include "symcache.h"
#include "process/proc_cache.h"
#include "process/procmaps.h"

/* Requests waiting at most, unless changed: past it pp_symloader_submit says -ENOSPC. */
#define PP_SYMLOADER_QUEUE_DEFAULT 4096u

struct pp_symloader_opts {
	const char *proc_root; /* NULL: "/proc" */
	size_t max_files;      /* the symbol cache's bounds (symcache.h) */
	size_t max_bytes;
	unsigned int open_flags; /* PP_ELF_OPEN_* */
	/* Where stripped files' debug files are looked for (NULL: nowhere). Borrowed. */
	const struct pp_debug_dirs *debug_dirs;
	/* Asked for a debug file none of the directories has (NULL: none); see symcache.h. */
	pp_debug_fetch_fn debug_fetch;
	void *debug_fetch_ctx;
	size_t max_queued; /* 0: PP_SYMLOADER_QUEUE_DEFAULT */
	/*
	 * Where the running kernel's image with DWARF is looked for, at the first kernel data
	 * type asked (NULL: kernel accesses get no type). Borrowed; its strings too.
	 */
	const struct pp_kernel_image_opts *kernel_image;
	/* The data types' debug sections in memory together; 0: PP_SYMLOADER_DATA_TYPE_BYTES. */
	uint64_t max_type_bytes;
	/* Answers of a resolver before it is made again; 0: PP_SYMLOADER_DATA_TYPE_ANSWERS. */
	uint32_t type_answers;
	/*
	 * The worker is woken by pp_symloader_kick (and by a wait), once for what a caller's
	 * turn queued, not once per request: a node starting programs asks for hundreds of
	 * files a second.
	 */
	bool kick_by_caller;
	/*
	 * Where files' own symbol tables are kept across restarts (symbol_store.h; NULL: not
	 * kept), within store_bytes (0: its default). One that cannot be used is said once and
	 * not used (store_err).
	 */
	const char *store_dir;
	uint64_t store_bytes;
};

struct pp_symloader_stats {
	struct pp_symcache_stats cache;
	struct pp_symbol_store_stats store;
	int store_err;			   /* 0, or why the store could not be used (-errno) */
	bool store_on;			   /* tables are kept across restarts */
	uint64_t cache_files, cache_bytes; /* gauges: what the cache holds now */
	uint64_t requests;		   /* mapping requests taken */
	uint64_t queue_full;		   /* requests refused: the queue was full */
	uint64_t via_map_files;		   /* files opened through /proc/PID/map_files */
	uint64_t via_root;		   /* ... by their path in the process's root, checked */
	uint64_t via_relative; /* ... the process gone: by their path in a relative's root */
	uint64_t via_identity; /* files not opened: cached under the name the mapping gives */
	uint64_t not_the_mapped_file; /* the path led to another file: refused (ESTALE) */
	uint64_t open_failed;	      /* gone, unreachable, not a regular file */
	uint64_t debug_loads;	      /* debug files (debuginfod) read for late naming */
	uint64_t data_types;	      /* data-type requests answered (a type or a reason) */
	uint64_t pending;	      /* gauge: requests queued or being loaded */
	/* the kernel's image: 0 not looked for yet, 1 open, or the -errno of the search
	 * (-EINPROGRESS: the debuginfod servers are fetching it; looked for again) */
	int kernel_image;
};

enum pp_symload_kind {
	PP_SYMLOAD_MAPPING,   /* a mapping's table */
	PP_SYMLOAD_DEBUG,     /* a debug file's table, fetched by build id (late naming) */
	PP_SYMLOAD_DATA_TYPE, /* the data type an instruction of a mapping accesses */
};

struct pp_symload_result {
	uint64_t tag;
	enum pp_symload_kind kind;
	struct pp_elf_symbols *syms; /* a reference the taker frees; NULL: none (err says why) */
	int err;		     /* 0, or the errno of the open or the read */
	char build_id[PP_BUILD_ID_HEX_SIZE]; /* PP_SYMLOAD_DEBUG: whose */
	/* PP_SYMLOAD_DATA_TYPE: the type (type_miss PP_DT_RESOLVED), or why there is none */
	enum pp_data_type_miss type_miss;
	struct pp_data_type type;
};

struct pp_symloader;

/* Starts the worker. NULL with errno set (EINVAL for a zero bound, ENOMEM, a thread's). */
struct pp_symloader *pp_symloader_new(const struct pp_symloader_opts *opts);
/* Stops the worker (after the file it is reading), drops what is queued and ready. */
void pp_symloader_free(struct pp_symloader *l);

/*
 * Queue the table of mapping m (a file mapping) of process pid; relatives (NULL, or
 * PP_PROC_RELATIVES pids) are where its file is looked for when pid is gone
 * (pp_mapped_file_open_gone). Never blocks. Returns 0, -ENOSPC when the queue is full
 * (counted; ask again later), -EINVAL, -ENOMEM.
 */
int pp_symloader_submit(struct pp_symloader *l, uint64_t tag, uint32_t pid,
			const uint32_t *relatives, const struct pp_map_entry *m);
/*
 * Queue the data type and field that the instruction at file_offset of mapping m's file (of
 * process pid) accesses: read from the file's DWARF or its debug file's. Resolvers are kept
 * for the last PP_SYMLOADER_DATA_TYPE_FILES files. Returns as pp_symloader_submit.
 */
#define PP_SYMLOADER_DATA_TYPE_FILES 8
/*
 * ... and their debug sections, read into the heap, at most this many bytes together (unless
 * opts.max_type_bytes says): a file whose DWARF alone is more gets no types (PP_DT_TOO_BIG),
 * whoever made it that big.
 */
#define PP_SYMLOADER_DATA_TYPE_BYTES (64ull << 20)
/*
 * A resolver is made again after this many answers: libdw keeps what it parsed for each (a
 * vmlinux's grows by about 0.25 KiB an instruction: 29 MiB after 1,000, 74 after 200,000).
 */
#define PP_SYMLOADER_DATA_TYPE_ANSWERS 32768u
int pp_symloader_submit_data_type(struct pp_symloader *l, uint64_t tag, uint32_t pid,
				  const uint32_t *relatives, const struct pp_map_entry *m,
				  uint64_t file_offset);
/*
 * Queue the data type and field that the kernel instruction at text_offset bytes past _stext
 * accesses (the address kallsyms shows less its _stext: KASLR's slide is out of it), read from
 * the kernel image opts.kernel_image finds. Returns as pp_symloader_submit; the result's
 * type_miss is PP_DT_NO_FILE while there is no image (pp_symloader_kernel_image says why),
 * with err EINPROGRESS while debuginfod fetches it: the caller asks again later, and the
 * search runs again at most once a second.
 */
int pp_symloader_submit_kernel_data_type(struct pp_symloader *l, uint64_t tag,
					 uint64_t text_offset);
/*
 * Queue the data type and field that the instruction at ip (the kernel's address) of loaded
 * module `module` (as kallsyms names it) accesses, read from the module's .ko and its debug
 * file, laid out where the kernel loaded it (kernel_module.h), looked for where
 * opts.kernel_image says. Modules are kept for PP_SYMLOADER_KERNEL_MODULES at once, a module
 * loaded again at other addresses laid out again; one whose files are not found is looked for
 * again after PP_SYMLOADER_KMOD_RETRY_S. The result's type_miss is PP_DT_KERNEL_MODULE while
 * the module has no files (pp_symloader_kernel_modules says why), err EINPROGRESS while
 * debuginfod fetches its debug file. symbol and symbol_addr (NULL, 0: none) are the module's
 * symbol around ip as kallsyms gives it: where the kernel hides the sections' addresses, the
 * section holding it is placed from it. Returns as pp_symloader_submit.
 */
#define PP_SYMLOADER_KERNEL_MODULES 8
#define PP_SYMLOADER_KMOD_RETRY_S 600
int pp_symloader_submit_kmod_data_type(struct pp_symloader *l, uint64_t tag, const char *module,
				       uint64_t ip, const char *symbol, uint64_t symbol_addr);
/*
 * The modules looked for so far: how many were laid out (*typed) and not (*untyped), and the
 * words of the last search that failed in why ("" when none). Any thread.
 */
void pp_symloader_kernel_modules(struct pp_symloader *l, uint32_t *typed, uint32_t *untyped,
				 char *why, size_t why_size);
/*
 * The kernel image's search: 1 with where it was found, 0 before it was looked for, or the
 * -errno of the search with why it failed, in why (-EINPROGRESS: being fetched). Any thread.
 */
int pp_symloader_kernel_image(struct pp_symloader *l, char *why, size_t why_size);
/* Queue the debug file of build_id, through opts.debug_fetch, for naming frames late. */
int pp_symloader_submit_debug(struct pp_symloader *l, uint64_t tag, const char *build_id);
/* Drop the cached tables with this build id (in queue order): their debug file arrived. */
int pp_symloader_forget_build_id(struct pp_symloader *l, const char *build_id);

/* With opts.kick_by_caller: wakes the worker where requests were queued since the last kick. */
void pp_symloader_kick(struct pp_symloader *l);

/* Whether results are ready: one atomic load, cheap enough for every sample. */
int pp_symloader_ready(const struct pp_symloader *l);

/* Up to max results ready now, oldest first; returns how many. */
size_t pp_symloader_take(struct pp_symloader *l, struct pp_symload_result *out, size_t max);

/*
 * Wait at most timeout_ms for a result to be ready (pp_symloader_wait_result), or for the
 * queue to be empty and the worker idle (pp_symloader_wait_idle). 0, or -ETIMEDOUT.
 */
int pp_symloader_wait_result(struct pp_symloader *l, uint64_t timeout_ms);
int pp_symloader_wait_idle(struct pp_symloader *l, uint64_t timeout_ms);

void pp_symloader_get_stats(struct pp_symloader *l, struct pp_symloader_stats *out);

#endif /* PP_COLLECTOR_SYMLOADER_H */

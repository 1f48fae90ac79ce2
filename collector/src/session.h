/*
 * The collector's sample pipeline: decoded shim records -> process metadata -> symbolized
 * frames -> the aggregated profile. One session per capture (record) or window (run), fed by
 * the ring-buffer drain on one thread; files are read by the symbol loader's worker, never on
 * that thread.
 */
#ifndef PP_SESSION_H
#define PP_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <pebsprof/profile.h>

#include "metadata/container_meta.h"
#include "sampling/record_decode.h"
#include "sampling/sideband.h"
#include "symbolize/data_type.h"
#include "symbolize/debug_file.h"
#include "symbolize/debuginfod_fetch.h"
#include "symbolize/kernel_image.h"
#include "symbolize/symbol_store.h"

/* The symbol cache's default bound: with the process cache's 16 MiB and the fixed tables,
 * the agent's caches stay within 64 MiB. */
#define PP_SESSION_SYMBOL_BYTES_DEFAULT (24u << 20)

/*
 * The outermost frame of a user stack whose walk reached a return address outside any
 * executable mapping (the heap, a stack, a file's data): the walk ends there, and the
 * frame says so instead of passing the error off as "[anonymous code]".
 */
#define PP_FRAME_NOT_CODE "[unwind error: return address not in code]"

struct pp_unwinder;

#define PP_SESSION_DROP_THREAD 0x1	  /* thread id and name */
#define PP_SESSION_DROP_PID 0x2		  /* process id; kernel threads become one process */
#define PP_SESSION_DROP_MEMORY_DETAIL 0x4 /* memory labels but memory.level */

/*
 * Leaves out of si what drop (PP_SESSION_DROP_*) says, zeroed so that samples differing only
 * there aggregate: call it once the sample's resource is known (that needs the pid). labels is
 * the writable array si->labels points to. The session does it to every sample; the fleet
 * simulation (tests/tools/pp_fleet_sim.c) calls it to make its samples alike.
 */
void pp_session_drop_dimensions(unsigned drop, struct pp_sample_info *si, struct pp_label *labels);

struct pp_session_opts {
	const char *proc_root;	  /* NULL: "/proc" */
	size_t max_processes;	  /* process cache bound; 0: 4096 */
	size_t max_symbol_files;  /* symbol cache bound; 0: 512 */
	size_t max_symbol_bytes;  /* symbol cache bound in bytes; 0: 24 MiB */
	size_t max_process_bytes; /* process cache bound in bytes; 0: 16 MiB */
	/* files' symbol tables kept across starts (symbol_store.h); NULL: not kept */
	const char *symbol_table_cache;
	uint64_t symbol_table_cache_bytes; /* its bound; 0: 128 MiB */
	size_t max_cached_frames;	   /* (pid, address) -> location cache bound; 0: 1 << 16 */
	/* CLOCK_REALTIME - CLOCK_MONOTONIC, to turn record times into wall-clock times. */
	int64_t mono_to_wall_ns;
	/* The events are precise: the record's ip replaces the first callchain entry (PMI ip). */
	int precise_ip;
	/* Kernel symbols; NULL: no kernel symbolization ("[kernel]" frames). Borrowed. */
	const struct pp_kallsyms *kallsyms;
	/* Kernel build id (hex) for the kernel mapping, or NULL. */
	const char *kernel_build_id;
	/*
	 * Memory events: where the running kernel's image with DWARF is looked for, to type the
	 * accesses of kernel code (at the first such sample; NULL: they keep their data object).
	 * Needs kallsyms (its _stext undoes KASLR). Borrowed.
	 */
	const struct pp_kernel_image_opts *kernel_image;
	/* The data types' DWARF in memory, all files together; 0: the loader's default. */
	uint64_t max_type_bytes;
	/* Answers of a data-type resolver before it is made again; 0: the loader's default. */
	uint32_t type_answers;
	/*
	 * 0: every sample is symbolized and added to the profile at once. N > 0: samples are
	 * first aggregated by their raw stack (addresses, pid, tid, comm) in a table of at most
	 * N stacks; a stack is symbolized once, on first sight, and repeats cost one hash
	 * lookup. The table reaches the profile on pp_session_flush() or when it is full.
	 */
	size_t raw_stack_entries;
	/* Keep the CPU of each sample (OTLP cpu.logical_number): one sample per stack and CPU. */
	int per_cpu;
	/*
	 * Dimensions samples leave out, PP_SESSION_DROP_* (0: keep all): a backend makes a series
	 * of each label set, so a fleet's agent sends few (pp_sample_info.hidden).
	 */
	unsigned drop;
	/*
	 * Where samples ran: each sample's cgroup (or process) turned into its container and pod,
	 * a resource of the profile (pp_sample_info.resource_id). NULL: no container
	 * attribution. Borrowed.
	 */
	struct pp_container_meta *containers;
	/*
	 * The events are memory events (mem-loads, mem-stores, IBS op). Samples whose record
	 * has PP_SF_MEM_FIELDS then get, for the fields the kernel really gave (mem_attr.h):
	 * the memory.* labels, a leaf PP_FRAME_DATA frame naming the data object (an ELF data
	 * symbol, else the mapping class), and their load latency added to the sample's
	 * latency sum. Create the profile with desc.mem_latency set to export the latter.
	 */
	int mem_event;
	/* (pid, mapping) -> data object cache bound (memory events); 0: 4096. */
	size_t max_mem_objects;
	/*
	 * The shim's unwind tables (--user-unwind auto, dwarf): each sample's process is noted
	 * (installed off the sample path), each exec and exit releases it. NULL: none. Borrowed.
	 */
	struct pp_unwinder *unwinder;
	/* Where stripped files' separate debug files are looked for; NULL: nowhere. Borrowed. */
	const struct pp_debug_dirs *debug_dirs;
	/*
	 * Debug files from debuginfod (NULL: none). Borrowed. Frames sent unnamed before their
	 * file arrived are named in the profile at the next flush (pp_session_apply_debug).
	 */
	struct pp_debuginfod *debuginfod;
	/*
	 * --symbolize none: no symbol table, debug file or perf map is read; user frames keep
	 * their ELF address, mapping and build id for a backend to name. Kernel frames are still
	 * named from kallsyms (opts.kallsyms), as the OTel eBPF profiler does.
	 */
	int addresses_only;
	/* JIT perf maps (/tmp/perf-PID.map) are not read. */
	int no_perf_maps;
	/* The perf maps' bound in bytes, all processes together; 0: 16 MiB. */
	size_t max_perf_map_bytes;
	/*
	 * Symbol tables are read by a worker (symbolize/symloader.h): a frame whose file is still
	 * being read becomes a placeholder, finished when the table comes. 0 (the agent): the
	 * sample path never waits. N: a sample waits up to N ms for its file's table, for callers
	 * that want every frame named at once and have no ring buffer to keep up with.
	 */
	uint64_t symbol_wait_ms;
	/*
	 * The symbol loader is woken once per pp_session_read_sideband (and where the session
	 * waits for it), not once per file asked for: the agent's poll loop sets it.
	 */
	bool symbols_kicked_per_turn;
	/*
	 * The kernel's side-band (NULL: none). Borrowed. Read before a sample newer than its
	 * last reading, so a sample's process and mappings are known even when the process is
	 * gone before the sample is read; execs then come from it, not the shim's task records.
	 */
	struct pp_sideband *sideband;
	/*
	 * With the side-band and an unwinder: a process's unwind list is made as soon as the
	 * side-band reports its code, not at its first sample, for the processes profiled
	 * (profiled NULL: all; else those it says yes to).
	 */
	int eager_unwind;
	int (*profiled)(void *ctx, uint32_t pid);
	void *profiled_ctx;
};

/* Where the names of frames came from: pp_session_stats.named[]. */
enum pp_frame_source {
	PP_NAMED_SYMTAB,     /* the file's own .symtab */
	PP_NAMED_DYNSYM,     /* its .dynsym (exported names only) */
	PP_NAMED_DEBUG_FILE, /* a separate debug file on disk */
	PP_NAMED_DEBUGINFOD, /* a debug file from debuginfod (named late ones included) */
	PP_NAMED_PERF_MAP,   /* a JIT perf map */
	PP_NAMED_KALLSYMS,   /* kernel symbols */
	PP_NAMED_GOPCLNTAB,  /* a stripped Go binary's own function table */
	PP_NAMED_SOURCES
};

/* The short name of a source ("symtab", "perf_map", ...), as record and /metrics print it. */
const char *pp_frame_source_name(enum pp_frame_source src);

struct pp_session_stats {
	struct pp_decode_stats decode;
	uint64_t samples;	     /* samples added to the profile */
	uint64_t off_cpu_samples;    /* ... of them off-CPU records (waits) */
	uint64_t off_cpu_woken_late; /* ... of those, with their wait for a CPU once woken apart */
	uint64_t launcher_records;   /* left out: record's command before its exec (the launcher) */
	uint64_t samples_late;	     /* ... taken before the window they went into started */
	uint64_t samples_walk_ended; /* ... whose user stack ended at a frame outside code */
	uint64_t samples_held;	     /* ... held during a grace for the window after it */
	uint64_t samples_no_process; /* process gone before we could read it */
	/*
	 * Samples of a process whose tables the shim did not have yet, with a copy of their stack
	 * (PP_SF_USTACK_RAW), walked when the tables were in: with the tables (of them whole,
	 * and short by why: the copy ended, no CFI at a pc, another stop), or left as the shim
	 * walked them (frame pointers): no table for any of its frames, or the walk refused (too
	 * many waiting, no unwinder, or an image replaced by exec whose mappings are not known).
	 * Of the copies queued, those of an image its process replaced by an exec since, walked
	 * with that image's mappings.
	 */
	uint64_t ustack_copies, copies_walked, copies_whole;
	uint64_t copies_short_copy_ended, copies_short_no_cfi, copies_short_other;
	uint64_t copies_no_tables, copies_refused, copies_of_replaced_images;
	/* Processes: images the side-band made (exec, fork) and the mappings it reported;
	 * /proc reads (a process's first, and rereads for an address no mapping held). */
	uint64_t process_images_reported, process_mappings_reported;
	uint64_t process_reads, process_map_rereads;
	/*
	 * Samples taken in an image an exec replaced before they were read: named with that
	 * image's mappings, or, where it is no longer kept (more execs since than kept), left
	 * without a process rather than given another program's; mappings reported after an
	 * exec of their image read earlier, given to that image.
	 */
	uint64_t samples_of_replaced_images, samples_of_images_not_kept, process_mappings_late;
	/* ... taken in an exec before the new image ran: user frame named in the exec's caller */
	uint64_t samples_in_exec;
	uint64_t sideband_records, sideband_lost, sideband_reads;
	/*
	 * ... whose process's maps or executable could not be read although it is there (no
	 * CAP_SYS_PTRACE for another user's process, an LSM such as AppArmor): their user
	 * frames are bare.
	 */
	uint64_t samples_unreadable;
	uint64_t frames;	     /* frames symbolized (cache hits included) */
	uint64_t frames_cached;	     /* answered by the frame cache */
	uint64_t frames_unmapped;    /* user address in no mapping */
	uint64_t frames_no_symbol;   /* mapped, but no symbol covers it */
	uint64_t frames_no_file;     /* the mapped file could not be read */
	uint64_t frame_cache_resets; /* the frame cache was full and started over */
	/* frames named from the name their table gave before (a window or an identity earlier):
	 * no search of the table, no demangling (symbolize/name_memo.h) */
	uint64_t names_memoized;
	uint64_t name_memo_resets;    /* the memo was full and started over */
	uint64_t task_events;	      /* exec/exit records seen */
	uint64_t add_errors;	      /* samples the profile refused (memory) */
	uint64_t raw_stack_hits;      /* samples aggregated onto an already seen raw stack */
	uint64_t raw_stack_flushes;   /* times the raw-stack table was emptied into the profile */
	uint64_t container_samples;   /* samples attributed to a container or pod */
	uint64_t processes_cached;    /* gauges: the process cache's entries now */
	uint64_t symbol_files_cached; /* the symbol cache's files now */
	/* gauges: the bytes each cache holds now */
	uint64_t process_cache_bytes, symbol_cache_bytes, frame_cache_bytes, raw_stack_bytes;
	uint64_t mem_obj_cache_bytes;
	uint64_t symbol_evictions; /* symbol tables evicted for the file or byte bound */
	uint64_t symbol_too_big;   /* symbol tables over the byte bound alone: not kept */
	uint64_t symbol_refused;   /* files claiming bytes a sparse file lacks: refused */
	/* Mapped files the symbol loader opened through /proc/PID/map_files, or by their path in
	 * the process's root; paths that led to another file (refused); files not opened. */
	uint64_t symbol_via_map_files, symbol_via_root;
	uint64_t symbol_via_relative; /* the process gone: by path in a relative's root */
	uint64_t symbol_via_identity; /* not opened: known by the side-band's identity */
	uint64_t symbol_not_mapped_file, symbol_open_failed;
	uint64_t symbol_queue_full; /* loader requests refused: its queue was full (asked again) */
	/* the symbol table cache on disk: whether used (its -errno when it could not be) */
	bool symbol_store_on;
	int symbol_store_err;
	struct pp_symbol_store_stats symbol_store;
	uint64_t symbol_pending;	/* gauge: files queued or being read now */
	uint64_t symbol_tables_at_once; /* mappings given a table the loader brought lately for
					 * the file their identity names: no request, no waiting */
	uint64_t frames_pending;	/* frames made while their file was read: placeholders... */
	uint64_t frames_resolved;	/* ... of which the table's arrival named or placed */
	/* Memory events (opts.mem_event). */
	uint64_t mem_samples;	      /* samples with at least one real memory field */
	uint64_t mem_no_fields;	      /* PP_SF_MEM_FIELDS set, but the kernel filled none */
	uint64_t mem_no_addr;	      /* no data address: no data-object frame */
	uint64_t mem_latency_samples; /* samples with a load latency */
	uint64_t data_symbols;	      /* data addresses named by an ELF data symbol */
	uint64_t data_classes;	      /* ... by their mapping's class ([heap], [anon], ...) */
	uint64_t data_unmapped;	      /* ... in no mapping ([unknown]) */
	uint64_t data_kernel;	      /* ... in the kernel ([kernel]) */
	/*
	 * The data type and field of samples with an exact IP in a file's code
	 * (symbolize/data_type.h): named, waiting for the loader (their data object's class
	 * for now), and not named by reason (PP_DT_*; index 0 unused).
	 */
	uint64_t data_typed;
	uint64_t data_type_pending;
	uint64_t data_untyped[PP_DT_MISS__COUNT];
	/*
	 * Locations made (each distinct frame once per window), by where their name came from,
	 * and those no source named: a file's frames sent as file+0xaddr, anonymous code with no
	 * perf map, kernel frames without symbols.
	 */
	uint64_t named[PP_NAMED_SOURCES];
	uint64_t unnamed;
	uint64_t named_late;	 /* unnamed locations named at a flush when their debug file came */
	uint64_t perf_map_bytes; /* gauge: what the perf maps hold */
	uint64_t perf_map_refused;   /* perf map files refused (a link, a FIFO, another user's) */
	uint64_t perf_map_bad_lines; /* perf map lines that did not parse */
	uint64_t perf_map_misses;    /* asked for a map not there, or of a process gone */
	uint64_t jit_given_up;	     /* anonymous code left unnamed: its process exited */
	uint64_t debug_files;	     /* stripped files named by a separate debug file on disk */
	uint64_t mem_obj_hits;	     /* (pid, mapping) cache hits */
	uint64_t mem_obj_evictions;  /* (pid, mapping) entries dropped (cache full) */
};

struct pp_session;

/* Returns NULL with errno set. The profile is borrowed; samples are added to it. */
struct pp_session *pp_session_new(const struct pp_session_opts *opts, struct pp_profile *profile);
void pp_session_free(struct pp_session *s);

/*
 * Adds the samples held in the raw-stack table to the profile (see raw_stack_entries).
 * Returns 0 or the first -errno the profile gave.
 */
int pp_session_flush(struct pp_session *s);

/*
 * Reads what the side-band holds (opts.sideband), so its ring does not fill while no sample
 * comes, and hands the unwinder and the symbol loader what this turn queued
 * (pp_unwinder_kick, pp_symloader_kick): once per poll of the ring buffer.
 */
void pp_session_read_sideband(struct pp_session *s);
/*
 * Samples whose stack copies the unwinder walked since (pp_unwinder_walk_later) go on to the
 * profile; pp_session_read_sideband and pp_session_flush take them too.
 */
void pp_session_take_walked(struct pp_session *s);

/*
 * Flushes into the current profile, then points the session at a new one (a new window);
 * caches that hold ids are reset.
 */
void pp_session_set_profile(struct pp_session *s, struct pp_profile *profile);

/* Handles one raw ring-buffer record. Returns 0 or -errno; malformed records are counted. */
int pp_session_handle_record(struct pp_session *s, const void *data, size_t len);

/*
 * A window's end: from here, sample records taken at or after boundary_mono_ns (the window's
 * end on the records' clock) are held, copied, whenever they are read, while those taken
 * before go into the current window, so that every record lands in the window it was taken
 * in. pp_session_release_held(), after pp_session_set_profile() switched to the next
 * window, feeds the held records to it. Task records are never held. At most 8 MiB is
 * held; past it records go to the closing window.
 */
void pp_session_hold_from(struct pp_session *s, uint64_t boundary_mono_ns);

/*
 * ... and from here records taken at or after next_boundary_mono_ns (the next window's end)
 * are held, those already held among them too: a window closed late (a stalled loop) keeps
 * only its own. 0: nothing is held any more.
 */
int pp_session_release_held(struct pp_session *s, uint64_t next_boundary_mono_ns);

/*
 * Process tgid is record's command, forked from this process and not yet exec'ed: its records
 * from before the exec are the launcher's, not the command's, and are left out and counted
 * (launcher_records). `record -- CMD` holds the command on a pipe until the events are
 * attached: off-CPU waits that began before mono_ns (the records' clock, when it was let go)
 * are that. Then it execs, and a busy machine may preempt it on the way: a record still
 * carrying this process's own name (prctl PR_GET_NAME) is the launcher's, unless it is newer
 * than the exec (a command of the same name).
 */
void pp_session_skip_launcher(struct pp_session *s, uint32_t tgid, uint64_t mono_ns);
/* The same as a pp_shim_record_fn: ctx is the session; never stops the poll. */
int pp_session_record_cb(void *ctx, const void *data, size_t len);
/* Handles one decoded record (tests feed synthetic records here). */
int pp_session_handle_decoded(struct pp_session *s, const struct pp_decoded *d);
/*
 * Handles one side-band event, as opts.sideband's drain does before each newer sample (tests
 * feed the kernel's reports of processes and mappings here).
 */
void pp_session_handle_sideband(struct pp_session *s, const struct pp_sb_event *ev);

void pp_session_get_stats(const struct pp_session *s, struct pp_session_stats *out);
/*
 * The kernel image's search for kernel data types (pp_symloader_kernel_image): 1 found, 0 not
 * looked for (no kernel memory sample with an exact IP yet), or its -errno, with why.
 */
int pp_session_kernel_image(struct pp_session *s, char *why, size_t why_size);
/*
 * The kernel modules searched for their files for data types (pp_symloader_kernel_modules):
 * laid out (*typed), not found (*untyped), and the last search that failed, in why.
 */
void pp_session_kernel_modules(struct pp_session *s, uint32_t *typed, uint32_t *untyped, char *why,
			       size_t why_size);

/*
 * Debug files that debuginfod delivered since the last call: the symbol cache rereads their
 * binaries for new frames, and the profile's locations sent unnamed in those files are named
 * now. pp_session_flush calls it; a long window may call it more often. Returns how many
 * locations were named.
 */
size_t pp_session_apply_debug(struct pp_session *s);
/* Wait (at most timeout_ms) for the debuginfod requests under way, then apply them. */
size_t pp_session_wait_debug(struct pp_session *s, uint64_t timeout_ms);

/*
 * Wait at most timeout_ms for the symbol tables being read, then finish the frames made while
 * they were (before a capture's profile is written, or a window closes). 0, or -ETIMEDOUT
 * (what came is applied all the same).
 */
int pp_session_wait_symbols(struct pp_session *s, uint64_t timeout_ms);

#endif /* PP_SESSION_H */

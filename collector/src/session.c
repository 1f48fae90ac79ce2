/* The sample pipeline: decode -> process -> symbolize -> aggregate. See session.h. */
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/hash.h"
#include "base/vec.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/kallsyms.h"
#include "symbolize/kernel_module.h"
#include "symbolize/demangle.h"
#include "symbolize/name_memo.h"
#include "memory/mem_attr.h"
#include "process/mapped_file.h"
#include "process/proc_cache.h"
#include "symbolize/perf_map.h"
#include "symbolize/symloader.h"
#include "symbolize/vdso.h"
#include "unwind/unwinder.h"

#define DEFAULT_MAX_PROCESSES 4096

static uint64_t mono_ms(void)
{
	return pp_clock_ns(CLOCK_MONOTONIC) / 1000000u;
}
#define DEFAULT_MAX_SYMBOL_FILES 512
/* The raw-stack table goes to the profile past this many bytes of entries, not only when it
 * is half full: deep stacks would otherwise hold tens of MiB until the window ends. */
#define RAW_STACK_MAX_BYTES (8u << 20)
/* Records held for the next window during a window's grace; past it they go to the closing
 * window (its samples then carry no time in it). */
#define HOLD_MAX_BYTES (8u << 20)
#define DEFAULT_MAX_CACHED_FRAMES (1u << 16)
/* The names of the last windows' frames (symbolize/name_memo.h): ~2-3 thousand a window under
 * the churn bench, each one or two names of ~40 bytes. */
#define NAME_MEMO_SLOTS (1u << 14)
#define NAME_MEMO_BYTES (1u << 20)
#define MAX_FRAMES (2 * PP_MAX_STACK_DEPTH + 2) /* + the ip and a data-object frame */

/*
 * (pid, process generation, address) -> location id of the current profile. A slot of an
 * earlier stamp is empty: the cache starts over (each window, or full) by a new stamp, where
 * clearing its MiB cost more than a window's lookups on a VM whose host reclaims memory.
 */
struct frame_slot {
	uint64_t addr;
	uint64_t generation;
	uint32_t pid;
	uint32_t location; /* 0: empty slot */
	uint32_t stamp;	   /* the cache's stamp when filled */
};

/* What a memory sample adds to its raw stack's key and sums (all 0 for other samples). */
struct mem_info {
	uint64_t label_key; /* pp_mem_label_key */
	uint32_t data_loc;  /* location of the data-object frame, 0 for none */
	uint32_t type_loc;  /* the data type's frame above it (data_loc is its field), 0: none */
	uint32_t latency;   /* load latency, cycles */
};

/*
 * The data types of exact-IP memory samples, by instruction of a file (its device, inode and
 * the instruction's file offset, so every process mapping the file shares the answer), asked
 * of the loader once. Bounded: a colliding instruction takes the slot over.
 */
#define DTYPE_SLOT_BITS 10
#define DTYPE_SLOTS (1u << DTYPE_SLOT_BITS)
enum { DTYPE_EMPTY, DTYPE_PENDING, DTYPE_DONE };
struct dtype_slot {
	uint64_t inode, file_offset, tag;
	uint32_t dev;
	uint8_t state, miss;	      /* miss: enum pp_data_type_miss, once DONE */
	uint32_t type_loc, field_loc; /* this window's locations; 0: intern again */
	char type[PP_DATA_TYPE_NAME_MAX];
	char leaf[PP_DATA_TYPE_NAME_MAX + PP_DATA_FIELD_MAX + 24];
};

/*
 * A raw stack seen before: its symbolized form and the samples aggregated onto it since the
 * last flush. Keyed by everything that decides the symbolized sample: for memory samples that
 * includes the resolved data object and the label key, never the raw data address.
 */
struct raw_stack {
	uint64_t hash;
	uint64_t generation; /* the process's, so an exec never reuses old names */
	uint64_t count, value, first_time;
	uint64_t latency;   /* sum, cycles */
	uint64_t label_key; /* mem_info */
	uint64_t cgroup_id; /* only with opts.containers, else 0 */
	uint32_t data_loc;  /* mem_info; also locs[0] when set */
	uint32_t tgid, tid;
	uint32_t cpu;		 /* only with opts.per_cpu, else 0 */
	uint16_t flags, nframes; /* PP_SF_KERNEL_IP; raw frames below */
	uint16_t nk, nlocs;
	uint32_t process_kind; /* enum pp_process_kind */
	uint32_t wait;	       /* enum pp_wait_state: off-CPU records, by state */
	char comm[16];
	char process_name[PP_PROC_COMM_LEN + 2];
	const char *process_path; /* in the same allocation */
	uint64_t ip;
	uint64_t *frames;
	uint32_t *locs;
	size_t bytes; /* the allocation, for the session's raw_bytes */
};

/*
 * The symbol table of one mapping of one process, so that each new address in it costs no
 * request: direct-mapped, overwritten on collision. A slot is PENDING from its request to the
 * loader until its result comes (tag matches), then READY with a reference to the table
 * (NULL: the file could not be read).
 */
#define MAPSYM_SLOTS 1024
#define MAPSYM_SLOT_BITS 10
enum mapsym_state { MAPSYM_EMPTY, MAPSYM_PENDING, MAPSYM_READY };
struct mapsym_slot {
	uint64_t generation, start, inode, tag;
	uint32_t pid;
	enum mapsym_state state;
	struct pp_elf_symbols *syms;
	bool named; /* id holds how the mapping names its file */
	struct pp_file_identity id;
};

/*
 * How long a file's identity (device, inode, generation) stands for the file once it was
 * seen to: an inode number reused by another file misleads the session no longer (frames kept
 * by file, FILE_FRAME_PID; symbol tables by identity, below), as in the loader's cache.
 */
#define FILE_FRAME_EPOCH_NS (30 * 1000000000ull)

/*
 * Symbol tables by the identity of the file a mapping named (pp_mapped_file_identity), as the
 * loader's results brought them: a new process mapping a file the node runs all the time gets
 * its table at once, without a request, placeholder frames, or naming them again when the
 * result comes. An identity stands for its file FILE_FRAME_EPOCH_NS after the result that
 * showed it; the loader verified it at most that long before.
 */
#define IDSYM_SLOTS 256
struct idsym_slot {
	struct pp_file_identity id;
	uint64_t until_ms;
	struct pp_elf_symbols *syms; /* a reference; NULL: empty */
};

/*
 * A location made while its file's table was still being read: a placeholder the loader's
 * result turns into the named frame in place (pp_profile_resolve_location), so every sample
 * already holding it follows. Bounded per window; past it frames stay placeholders.
 */
#define MAX_PENDING_LOCATIONS 65536
struct pending_loc {
	uint64_t tag, addr, start, end, offset;
	uint64_t file_key; /* its file's frames' key (see FILE_FRAME_PID), 0: none */
	uint32_t location;
};

/*
 * A frame of anonymous code no perf map named yet: its placeholder keeps the address
 * ("[anonymous code]+0x..."), and the runtime's map is asked again at most every second and
 * when the window closes (a JVM writes its map when told, jcmd Compiler.perfmap), naming it in
 * place. Bounded per window.
 */
#define MAX_JIT_UNNAMED 16384
#define JIT_RETRY_NS 1000000000ull
struct jit_unnamed {
	uint64_t addr, generation;
	uint32_t pid, location;
};

/* Processes given unwind lists at once per reading of the side-band; the rest on a sample. */
#define SB_DIRTY_MAX 256

struct pp_session {
	struct pp_session_opts opts;
	uint32_t launcher_tgid; /* pp_session_skip_launcher: 0 when none */
	uint64_t launcher_until_ns;
	uint64_t launcher_exec_ns; /* its exec's record's time; 0: not seen yet */
	char launcher_comm[16];	   /* its name until the exec: ours */
	struct mapsym_slot mapsyms[MAPSYM_SLOTS];
	struct idsym_slot idsyms[IDSYM_SLOTS];
	struct raw_stack **raw; /* open addressing, raw_cap slots (power of two) */
	size_t raw_cap, raw_used;
	size_t raw_bytes; /* held by the entries of the raw-stack table */
	/* Records taken at or after hold_boundary_ns while holding (length-prefixed copies). */
	int holding;
	uint64_t hold_boundary_ns;
	uint8_t *held;
	size_t held_len, held_cap;
	char *proc_root;
	struct pp_profile *profile;
	struct pp_proc_cache *procs;
	struct pp_symloader *loader;
	struct pp_vdso vdso; /* the agent's own: names every 64-bit process's vdso frames */
	uint64_t next_tag;
	struct pending_loc *pending;
	size_t npending, pending_cap;
	struct jit_unnamed *jit;
	size_t njit, jit_cap;
	uint64_t jit_retry_ns;		/* CLOCK_MONOTONIC of the last retry */
	struct pp_perf_maps *perf_maps; /* NULL: not read */
	struct frame_slot *frames;
	size_t frames_cap, frames_used;
	uint32_t frames_stamp;	    /* slots of another stamp are empty */
	struct pp_name_memo *names; /* NULL: frames are not named here (addresses_only) */
	uint32_t kernel_mapping;
	struct pp_mem_objcache *objs; /* memory events only */
	struct dtype_slot *dtypes;    /* memory events only: DTYPE_SLOTS */
	uint64_t ktext;		      /* kallsyms' _stext, once looked for (0: none) */
	int ktext_looked;
	uint32_t data_kernel_loc, data_unknown_loc;
	uint32_t not_code_loc; /* the window's PP_FRAME_NOT_CODE location; 0: none yet */
	uint64_t sb_read_ns;   /* CLOCK_MONOTONIC when the side-band was last read */
	uint64_t file_frame_epoch, file_frame_epoch_ns; /* see FILE_FRAME_PID */
	uint32_t sb_dirty[SB_DIRTY_MAX]; /* processes with new code in this reading */
	size_t nsb_dirty;
	struct pp_session_stats stats;
};

static struct frame_slot *frame_slot(struct pp_session *s, uint32_t pid, uint64_t gen,
				     uint64_t addr)
{
	size_t mask = s->frames_cap - 1;
	size_t i = pp_mix64(addr ^ ((uint64_t)pid << 32) ^ (gen * 0x9e3779b97f4a7c15ull)) & mask;

	for (;;) {
		struct frame_slot *slot = &s->frames[i];

		if (slot->stamp != s->frames_stamp) {
			/* left from before the cache started over: empty, and made so */
			slot->location = 0;
			slot->stamp = s->frames_stamp;
			return slot;
		}
		if (!slot->location ||
		    (slot->addr == addr && slot->pid == pid && slot->generation == gen))
			return slot;
		i = (i + 1) & mask;
	}
}

static void frame_cache_reset(struct pp_session *s)
{
	if (++s->frames_stamp == 0) { /* every 2^32 starts: clear it once */
		memset(s->frames, 0, s->frames_cap * sizeof(*s->frames));
		s->frames_stamp = 1;
	}
	s->frames_used = 0;
}

static void frame_cache_put(struct pp_session *s, struct frame_slot *slot, uint32_t pid,
			    uint64_t gen, uint64_t addr, uint32_t location)
{
	/* Keep the table at most 3/4 full so probes stay short; start over when it fills. */
	if ((s->frames_used + 1) * 4 > s->frames_cap * 3) {
		frame_cache_reset(s);
		s->stats.frame_cache_resets++;
		slot = frame_slot(s, pid, gen, addr);
	}
	slot->addr = addr;
	slot->pid = pid;
	slot->generation = gen;
	slot->location = location;
	slot->stamp = s->frames_stamp;
	s->frames_used++;
}

static void raw_clear(struct pp_session *s)
{
	for (size_t i = 0; s->raw_used && i < s->raw_cap; i++) {
		free(s->raw[i]); /* frames and locs live in the same allocation */
		s->raw[i] = NULL;
	}
	s->raw_used = 0;
	s->raw_bytes = 0;
}

/*
 * Per sample, so cheap: one multiply per word (a short dependency chain), one full mix at the
 * end. Collisions only cost a comparison; raw_matches decides.
 */
static uint32_t raw_cpu(const struct pp_session *s, const struct pp_decoded *d)
{
	return s->opts.per_cpu ? d->sample.cpu : 0;
}

/* The record's cgroup as the container lookup takes it: a key of v1 and v2 is marked. */
static uint64_t cgroup_key(const struct pp_sample *rec)
{
	return (rec->flags & PP_SF_CGROUP_V1) ? rec->cgroup_id | PP_CONTAINER_KEY_V1
					      : rec->cgroup_id;
}

static uint64_t raw_cgroup(const struct pp_session *s, const struct pp_decoded *d)
{
	return s->opts.containers ? cgroup_key(&d->sample) : 0;
}

/* An off-CPU record's state as the profile names it (pp_wait_state); 0 for a sample. */
static uint32_t wait_of(const struct pp_sample *rec)
{
	static const uint32_t states[PP_OFF_CPU_STATES] = {
	    [PP_OFF_CPU_RUNNABLE] = PP_WAIT_RUNNABLE,	[PP_OFF_CPU_SLEEPING] = PP_WAIT_SLEEPING,
	    [PP_OFF_CPU_DISK] = PP_WAIT_DISK,		[PP_OFF_CPU_STOPPED] = PP_WAIT_STOPPED,
	    [PP_OFF_CPU_THROTTLED] = PP_WAIT_THROTTLED,
	};

	if (!(rec->flags & PP_SF_OFF_CPU))
		return PP_WAIT_NONE;
	return rec->weight < PP_OFF_CPU_STATES ? states[rec->weight] : PP_WAIT_SLEEPING;
}

static uint64_t raw_hash(const struct pp_decoded *d, uint64_t generation, uint32_t cpu,
			 uint64_t cgroup_id, const struct mem_info *mi)
{
	const uint64_t k = 0x9e3779b97f4a7c15ull;
	const struct pp_sample *rec = &d->sample;
	uint32_t n = (uint32_t)rec->nr_kstack + rec->nr_ustack;
	uint64_t h = ((uint64_t)rec->tgid << 32 | rec->tid) ^ generation ^ ((uint64_t)cpu << 20);
	uint64_t comm[2];

	memcpy(comm, rec->comm, sizeof(comm));
	h = (h ^ comm[0]) * k;
	h = (h ^ comm[1] ^ rec->flags) * k;
	h = (h ^ rec->ip ^ ((uint64_t)rec->nr_kstack << 48)) * k;
	h = (h ^ mi->label_key ^ ((uint64_t)mi->data_loc << 7)) * k;
	h = (h ^ cgroup_id ^ ((uint64_t)wait_of(rec) << 40)) * k;
	for (uint32_t i = 0; i < n; i++)
		h = ((h ^ pp_decoded_frame(d, i)) * k) ^ (h >> 29);
	h = pp_mix64(h);
	return h ? h : 1; /* 0 marks an empty slot */
}

static int raw_matches(const struct raw_stack *e, const struct pp_decoded *d, uint64_t hash,
		       uint64_t generation, uint32_t cpu, uint64_t cgroup_id,
		       const struct mem_info *mi)
{
	const struct pp_sample *rec = &d->sample;

	if (e->hash != hash || e->cpu != cpu || e->data_loc != mi->data_loc ||
	    e->label_key != mi->label_key || e->cgroup_id != cgroup_id)
		return 0;

	if (e->hash != hash || e->tgid != rec->tgid || e->tid != rec->tid ||
	    e->generation != generation || e->ip != rec->ip ||
	    e->flags != (rec->flags & PP_SF_KERNEL_IP) || e->wait != wait_of(rec) ||
	    e->nk != rec->nr_kstack || e->nframes != rec->nr_kstack + rec->nr_ustack ||
	    memcmp(e->comm, rec->comm, sizeof(e->comm)))
		return 0;
	for (uint32_t i = 0; i < e->nframes; i++)
		if (e->frames[i] != pp_decoded_frame(d, i))
			return 0;
	return 1;
}

/* The slot holding this raw stack, or the empty slot where it belongs. */
static struct raw_stack **raw_slot(struct pp_session *s, const struct pp_decoded *d, uint64_t hash,
				   uint64_t generation, const struct mem_info *mi)
{
	size_t mask = s->raw_cap - 1;

	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		struct raw_stack **slot = &s->raw[i];

		if (!*slot ||
		    raw_matches(*slot, d, hash, generation, raw_cpu(s, d), raw_cgroup(s, d), mi))
			return slot;
	}
}

/* The profile's resource for the container a sample ran in; 0 when none or not known. */
static uint32_t resource_of(struct pp_session *s, uint64_t cgroup_id, uint32_t pid,
			    uint64_t generation)
{
	const struct pp_container_info *info;
	struct pp_label attrs[PP_CONTAINER_MAX_ATTRS];
	size_t n;

	if (!s->opts.containers)
		return 0;
	info = pp_container_meta_lookup(s->opts.containers, cgroup_id, pid, generation);
	n = pp_container_info_attrs(info, attrs, PP_CONTAINER_MAX_ATTRS);
	return n ? pp_profile_intern_resource(s->profile, attrs, (uint32_t)n) : 0;
}

void pp_session_drop_dimensions(unsigned drop, struct pp_sample_info *si, struct pp_label *labels)
{
	if (drop & PP_SESSION_DROP_THREAD) {
		si->tid = 0;
		si->thread_name = "";
		si->hidden |= PP_SAMPLE_HIDE_THREAD;
	}
	if (drop & PP_SESSION_DROP_PID) {
		si->pid = 0;
		si->hidden |= PP_SAMPLE_HIDE_PID;
		/* their comm is all they have, and kworker/0:1-events names are many */
		if (si->process_kind == PP_PROCESS_KERNEL_THREAD) {
			si->process_name = "[kernel]";
			si->process_path = NULL;
		}
	}
	if ((drop & PP_SESSION_DROP_MEMORY_DETAIL) && si->nlabels) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < si->nlabels; i++)
			if (!strcmp(labels[i].key, PP_LABEL_MEM_LEVEL))
				labels[n++] = labels[i];
		si->nlabels = n;
	}
}

static int raw_add_to_profile(struct pp_session *s, const struct raw_stack *e)
{
	struct pp_mem_labels ml;
	struct pp_sample_info si = {
	    .locations = e->locs,
	    .nlocations = e->nlocs,
	    .pid = e->tgid,
	    .tid = e->tid,
	    .thread_name = e->comm,
	    .process_name = e->process_name,
	    .process_path = e->process_path,
	    .process_kind = e->process_kind,
	    .count = e->count,
	    .value = e->value,
	    .first_time_unix_ns = e->first_time,
	    .has_cpu = (uint32_t) !!s->opts.per_cpu,
	    .cpu = e->cpu,
	    .latency = e->latency,
	    .wait = e->wait,
	};
	int ret;

	if (!e->count)
		return 0;
	si.resource_id = resource_of(s, e->cgroup_id, e->tgid, e->generation);
	if (si.resource_id)
		s->stats.container_samples += e->count;
	if (e->label_key) {
		si.nlabels = pp_mem_labels_from_key(e->label_key, &ml);
		si.labels = ml.labels;
	}
	pp_session_drop_dimensions(s->opts.drop, &si, ml.labels);
	ret = pp_profile_add_sample(s->profile, &si);
	if (ret)
		s->stats.add_errors += e->count;
	return ret;
}

static void retry_jit_names(struct pp_session *s);

int pp_session_flush(struct pp_session *s)
{
	int first_err = 0;

	pp_symloader_kick(s->loader);
	pp_session_take_walked(
	    s); /* the walks done: the ones still waiting go to the next window */

	if (s->njit)
		retry_jit_names(s);
	pp_session_apply_debug(s);
	if (!s->raw_used)
		return 0;
	for (size_t i = 0; i < s->raw_cap; i++) {
		int ret;

		if (!s->raw[i])
			continue;
		ret = raw_add_to_profile(s, s->raw[i]);
		if (ret && !first_err)
			first_err = ret;
	}
	raw_clear(s);
	s->stats.raw_stack_flushes++;
	return first_err;
}

struct pp_session *pp_session_new(const struct pp_session_opts *opts, struct pp_profile *profile)
{
	struct pp_proc_cache_opts popts = {0};
	struct pp_session *s = calloc(1, sizeof(*s));
	size_t cap = 1;

	if (!s)
		return NULL;
	s->opts = *opts;
	s->proc_root = strdup(opts->proc_root ? opts->proc_root : "/proc");
	popts.proc_root = s->proc_root;
	popts.capacity = opts->max_processes ? opts->max_processes : DEFAULT_MAX_PROCESSES;
	popts.max_bytes = opts->max_process_bytes;
	s->procs = pp_proc_cache_new(&popts);
	{
		struct pp_symloader_opts lo = {
		    .proc_root = s->proc_root,
		    .max_files =
			opts->max_symbol_files ? opts->max_symbol_files : DEFAULT_MAX_SYMBOL_FILES,
		    .max_bytes = opts->max_symbol_bytes ? opts->max_symbol_bytes
							: PP_SESSION_SYMBOL_BYTES_DEFAULT,
		    .open_flags = opts->addresses_only ? PP_ELF_OPEN_NO_SYMBOLS : 0,
		    .debug_dirs = opts->debug_dirs,
		    .debug_fetch = opts->debuginfod ? pp_debuginfod_fetch : NULL,
		    .debug_fetch_ctx = opts->debuginfod,
		    .kernel_image = opts->kallsyms ? opts->kernel_image : NULL,
		    .max_type_bytes = opts->max_type_bytes,
		    .type_answers = opts->type_answers,
		    .kick_by_caller = opts->symbols_kicked_per_turn,
		    .store_dir = opts->symbol_table_cache,
		    .store_bytes = opts->symbol_table_cache_bytes,
		};

		s->loader = s->proc_root ? pp_symloader_new(&lo) : NULL;
	}
	while (cap <
	       (opts->max_cached_frames ? opts->max_cached_frames : DEFAULT_MAX_CACHED_FRAMES))
		cap <<= 1;
	s->frames_cap = cap < 16 ? 16 : cap;
	s->frames = calloc(s->frames_cap, sizeof(*s->frames));
	s->frames_stamp = 1; /* calloc's slots (stamp 0) are empty */
	if (!opts->addresses_only &&
	    !(s->names = pp_name_memo_new(NAME_MEMO_SLOTS, NAME_MEMO_BYTES))) {
		pp_session_free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (!opts->addresses_only && !opts->no_perf_maps) {
		struct pp_perf_maps_opts mo = {
		    .proc_root = s->proc_root,
		    .max_bytes = opts->max_perf_map_bytes,
		};

		s->perf_maps = pp_perf_maps_new(&mo);
		if (!s->perf_maps) {
			pp_session_free(s);
			errno = ENOMEM;
			return NULL;
		}
	}
	if (opts->mem_event) {
		s->objs = pp_mem_objcache_new(opts->max_mem_objects);
		s->dtypes = calloc(DTYPE_SLOTS, sizeof(*s->dtypes));
	}
	if (!s->proc_root || !s->procs || !s->loader || !s->frames ||
	    (opts->mem_event && (!s->objs || !s->dtypes))) {
		pp_session_free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (opts->raw_stack_entries) {
		size_t rc = 16;

		/* At most half full, so probes stay short. */
		while (rc < opts->raw_stack_entries * 2)
			rc <<= 1;
		s->raw = calloc(rc, sizeof(*s->raw));
		if (!s->raw) {
			pp_session_free(s);
			errno = ENOMEM;
			return NULL;
		}
		s->raw_cap = rc;
	}
	/* none (no vdso, or unreadable): its frames stay "[vdso]" */
	(void)pp_vdso_open_own(&s->vdso, "/proc/self/maps");
	s->profile = profile;
	return s;
}

void pp_session_free(struct pp_session *s)
{
	if (!s)
		return;
	raw_clear(s);
	free(s->raw);
	pp_proc_cache_free(s->procs);
	pp_symloader_free(s->loader); /* first: the worker may still read a file */
	pp_vdso_fini(&s->vdso);
	for (size_t i = 0; i < MAPSYM_SLOTS; i++)
		pp_elf_symbols_free(s->mapsyms[i].syms);
	for (size_t i = 0; i < IDSYM_SLOTS; i++)
		pp_elf_symbols_free(s->idsyms[i].syms);
	free(s->pending);
	free(s->jit);
	pp_perf_maps_free(s->perf_maps);
	pp_mem_objcache_free(s->objs);
	free(s->dtypes);
	free(s->frames);
	pp_name_memo_free(s->names);
	free(s->proc_root);
	free(s->held);
	free(s);
}

void pp_session_set_profile(struct pp_session *s, struct pp_profile *profile)
{
	pp_session_flush(s);
	/* placeholders of the closing window stay as they are; the tables still arrive */
	s->npending = 0;
	s->njit = 0;
	s->profile = profile;
	s->kernel_mapping = 0;
	frame_cache_reset(s);
	s->data_kernel_loc = 0;
	s->data_unknown_loc = 0;
	s->not_code_loc = 0;
	if (s->objs)
		pp_mem_objcache_reset(s->objs);
	for (size_t i = 0; s->dtypes && i < DTYPE_SLOTS; i++)
		s->dtypes[i].type_loc = s->dtypes[i].field_loc = 0; /* the new window's, later */
}

void pp_session_get_stats(const struct pp_session *s, struct pp_session_stats *out)
{
	*out = s->stats;
	out->processes_cached = pp_proc_cache_count(s->procs);
	out->process_cache_bytes =
	    pp_proc_cache_bytes(s->procs) + pp_proc_cache_buffer_bytes(s->procs);
	{
		struct pp_name_memo_stats ns;

		pp_name_memo_stats(s->names, &ns);
		out->frame_cache_bytes = s->frames_cap * sizeof(*s->frames) + ns.bytes;
		out->name_memo_resets = ns.resets;
	}
	{
		struct pp_proc_cache_stats ps;
		struct pp_sideband_stats sbs;

		pp_proc_cache_get_stats(s->procs, &ps);
		out->process_images_reported = ps.sb_images;
		out->process_mappings_reported = ps.sb_mmaps;
		out->process_mappings_late = ps.sb_mmaps_late;
		out->process_reads = ps.loads;
		out->process_map_rereads = ps.reloads_for_unplaced_addr;
		pp_sideband_get_stats(s->opts.sideband, &sbs);
		out->sideband_records = sbs.records;
		out->sideband_lost = sbs.lost;
		out->sideband_reads = sbs.drains;
	}
	out->raw_stack_bytes = s->raw_cap * sizeof(*s->raw) + s->raw_bytes;
	out->mem_obj_cache_bytes = pp_mem_objcache_bytes(s->objs);
	{
		struct pp_symloader_stats ls;

		pp_symloader_get_stats(s->loader, &ls);
		out->symbol_files_cached = ls.cache_files;
		out->symbol_cache_bytes = ls.cache_bytes;
		out->symbol_evictions = ls.cache.evictions;
		out->symbol_too_big = ls.cache.too_big;
		out->symbol_refused = ls.cache.refused;
		out->symbol_not_mapped_file = ls.not_the_mapped_file;
		out->symbol_open_failed = ls.open_failed;
		out->symbol_via_map_files = ls.via_map_files;
		out->symbol_via_root = ls.via_root;
		out->symbol_via_relative = ls.via_relative;
		out->symbol_via_identity = ls.via_identity;
		out->symbol_queue_full = ls.queue_full;
		out->symbol_pending = ls.pending;
		out->debug_files = ls.cache.debug_files;
		out->symbol_store_on = ls.store_on;
		out->symbol_store_err = ls.store_err;
		out->symbol_store = ls.store;
	}
	if (s->perf_maps) {
		struct pp_perf_maps_stats ms;

		pp_perf_maps_get_stats(s->perf_maps, &ms);
		out->perf_map_bytes = pp_perf_maps_bytes(s->perf_maps);
		out->perf_map_refused = ms.refused;
		out->perf_map_bad_lines = ms.bad_lines;
		out->perf_map_misses = ms.files_missing;
	}
	if (s->objs) {
		struct pp_mem_objcache_stats os;

		pp_mem_objcache_get_stats(s->objs, &os);
		out->mem_obj_hits = os.hits;
		out->mem_obj_evictions = os.evictions;
	}
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

static uint32_t kernel_location(struct pp_session *s, uint64_t addr)
{
	struct frame_slot *slot = frame_slot(s, 0, 0, addr);
	struct pp_location_info loc = {0};
	const char *name = NULL;
	uint32_t id;

	if (slot->location) {
		s->stats.frames_cached++;
		return slot->location;
	}
	if (!s->kernel_mapping) {
		struct pp_mapping_info m = {
		    .start = 0,
		    .limit = UINT64_MAX,
		    .filename = "[kernel.kallsyms]",
		    .build_id = s->opts.kernel_build_id ? s->opts.kernel_build_id : "",
		};
		s->kernel_mapping = pp_profile_intern_mapping(s->profile, &m);
	}
	if (s->opts.kallsyms)
		name = pp_kallsyms_lookup(s->opts.kallsyms, addr, NULL, NULL);
	if (!name) {
		s->stats.frames_no_symbol++;
		s->stats.unnamed++;
		name = "[kernel]";
	} else {
		s->stats.named[PP_NAMED_KALLSYMS]++;
	}
	loc.mapping_id = s->kernel_mapping;
	loc.address = addr;
	loc.function = name;
	loc.kind = PP_FRAME_KERNEL;
	id = pp_profile_intern_location(s->profile, &loc);
	if (id)
		frame_cache_put(s, slot, 0, 0, addr, id);
	return id;
}

static void mapsym_clear(struct mapsym_slot *slot)
{
	pp_elf_symbols_free(slot->syms);
	memset(slot, 0, sizeof(*slot));
}

static void apply_symbol_results(struct pp_session *s);

static struct idsym_slot *idsym_slot(struct pp_session *s, const struct pp_file_identity *id)
{
	uint64_t h = pp_mix64(((uint64_t)id->dev_major << 32 | id->dev_minor) ^
			      pp_mix64(id->inode) ^ pp_mix64(id->ino_generation + 1));

	return &s->idsyms[h & (IDSYM_SLOTS - 1)];
}

/* The table the loader last brought for identity id, while it stands for its file. */
static struct pp_elf_symbols *idsym_get(struct pp_session *s, const struct pp_file_identity *id)
{
	struct idsym_slot *slot = idsym_slot(s, id);

	if (!slot->syms || memcmp(&slot->id, id, sizeof(*id)) || mono_ms() >= slot->until_ms)
		return NULL;
	return slot->syms;
}

static void idsym_put(struct pp_session *s, const struct pp_file_identity *id,
		      struct pp_elf_symbols *syms)
{
	struct idsym_slot *slot = idsym_slot(s, id);

	pp_elf_symbols_free(slot->syms); /* a colliding identity takes the slot over */
	*slot = (struct idsym_slot){.id = *id,
				    .until_ms = mono_ms() + FILE_FRAME_EPOCH_NS / 1000000u,
				    .syms = pp_elf_symbols_ref(syms)};
}

/*
 * The symbol table of the file behind a mapping, from the loader: NULL while it is being read
 * (*pending gets the request's tag) or when it cannot be (*pending 0). The first sample of a
 * mapping asks for it; with opts.symbol_wait_ms the sample waits that long for it.
 */
static const struct pp_elf_symbols *mapping_symbols(struct pp_session *s, const struct pp_proc *p,
						    const struct pp_map_entry *m, uint64_t *pending)
{
	size_t i = pp_mix64(((uint64_t)p->pid << 32) ^ m->start) & (MAPSYM_SLOTS - 1);
	struct mapsym_slot *slot = &s->mapsyms[i], fresh;
	struct pp_elf_symbols *known;
	uint64_t tag;

	*pending = 0;
	if (slot->state != MAPSYM_EMPTY && slot->pid == p->pid &&
	    slot->generation == p->generation && slot->start == m->start &&
	    slot->inode == m->inode) {
		if (slot->state == MAPSYM_READY)
			return slot->syms;
		*pending = slot->tag;
		return NULL;
	}
	mapsym_clear(slot);
	fresh = (struct mapsym_slot){
	    .generation = p->generation, .start = m->start, .inode = m->inode, .pid = p->pid};
	fresh.named = pp_mapped_file_identity(m, &fresh.id);
	if (fresh.named && (known = idsym_get(s, &fresh.id))) {
		fresh.state = MAPSYM_READY;
		fresh.syms = pp_elf_symbols_ref(known);
		*slot = fresh;
		s->stats.symbol_tables_at_once++;
		return slot->syms;
	}
	tag = ++s->next_tag << MAPSYM_SLOT_BITS | i;
	if (pp_symloader_submit(s->loader, tag, p->pid, p->relatives, m) != 0)
		return NULL; /* the queue is full: counted, and asked again at the next sample */
	fresh.tag = tag;
	fresh.state = MAPSYM_PENDING;
	*slot = fresh;
	if (s->opts.symbol_wait_ms) {
		uint64_t until = mono_ms() + s->opts.symbol_wait_ms, now;

		while (slot->tag == tag && slot->state == MAPSYM_PENDING &&
		       (now = mono_ms()) < until) {
			pp_symloader_wait_result(s->loader, until - now);
			apply_symbol_results(s);
		}
		if (slot->tag == tag && slot->state == MAPSYM_READY)
			return slot->syms;
	}
	*pending = slot->tag == tag && slot->state == MAPSYM_PENDING ? tag : 0;
	return NULL;
}

static enum pp_frame_source source_of(const struct pp_elf_symbols *syms)
{
	switch (pp_elf_symbols_source(syms)) {
	case PP_SYMBOLS_DYNSYM:
		return PP_NAMED_DYNSYM;
	case PP_SYMBOLS_DEBUG_FILE:
		return PP_NAMED_DEBUG_FILE;
	case PP_SYMBOLS_DEBUGINFOD:
		return PP_NAMED_DEBUGINFOD;
	case PP_SYMBOLS_GOPCLNTAB:
		return PP_NAMED_GOPCLNTAB;
	default:
		return PP_NAMED_SYMTAB;
	}
}

const char *pp_frame_source_name(enum pp_frame_source src)
{
	static const char *const names[PP_NAMED_SOURCES] = {
	    [PP_NAMED_SYMTAB] = "symtab",	  [PP_NAMED_DYNSYM] = "dynsym",
	    [PP_NAMED_DEBUG_FILE] = "debug_file", [PP_NAMED_DEBUGINFOD] = "debuginfod",
	    [PP_NAMED_PERF_MAP] = "perf_map",	  [PP_NAMED_KALLSYMS] = "kallsyms",
	    [PP_NAMED_GOPCLNTAB] = "gopclntab",
	};

	return (unsigned)src < PP_NAMED_SOURCES ? names[src] : "unknown";
}

/* The name a JIT runtime's perf map gives addr (*raw: as the map spells it), or NULL. */
static const char *jit_name(struct pp_session *s, const struct pp_proc *p, uint64_t addr, char *buf,
			    size_t size, const char **raw)
{
	const char *name;

	if (!s->perf_maps)
		return NULL;
	name = pp_perf_maps_lookup(s->perf_maps, p->pid, p->generation, addr);
	if (!name)
		return NULL;
	s->stats.named[PP_NAMED_PERF_MAP]++;
	*raw = name;
	/* C++ JITs (and .NET's native stubs) may write mangled names */
	return pp_demangle(name, buf, size);
}

/*
 * syms's name of vaddr (demangled, in demangled or the memo) and *raw its symbol: from the
 * memo where a window before asked already (valid until the memo's next put).
 */
static const char *symbol_name(struct pp_session *s, const struct pp_elf_symbols *syms,
			       uint64_t vaddr, const char **raw, char *demangled, size_t dsize)
{
	uint64_t table = pp_elf_symbols_serial(syms);
	const char *name;

	if (pp_name_memo_get(s->names, table, vaddr, &name, raw)) {
		s->stats.names_memoized++;
		return name;
	}
	*raw = pp_elf_symbols_lookup(syms, vaddr, NULL);
	name = pp_demangle(*raw, demangled, dsize);
	pp_name_memo_put(s->names, table, vaddr, name, *raw);
	return name;
}

/*
 * A frame at addr in file mapping m: its ELF address, name and mapping from the file's table
 * syms (NULL: not read, or not yet), else a JIT perf map for memfd code (p not NULL), else
 * the placeholder "file+0xaddr" that keeps its identity for a backend. Fills loc (address,
 * function, unnamed, mapping_id) and counts where the name came from.
 */
static void file_frame(struct pp_session *s, const struct pp_elf_symbols *syms, uint64_t addr,
		       const struct pp_map_entry *m, const struct pp_proc *p,
		       struct pp_location_info *loc, char *placeholder, size_t psize,
		       char *demangled, size_t dsize, uint32_t placeholder_mapping)
{
	struct pp_mapping_info mi = {0};
	uint64_t vaddr = addr;
	const char *name = NULL, *raw = NULL;
	int placed = 0;

	if (syms && pp_elf_symbols_map_addr(syms, addr, m->start, m->offset, &vaddr) == 0) {
		placed = 1;
		name = symbol_name(s, syms, vaddr, &raw, demangled, dsize);
		if (name)
			s->stats.named[source_of(syms)]++;
	}
	/* code in a memfd (a JIT's double mapping) is named by the runtime's perf map */
	if (!name && p && strncmp(m->path, "/memfd:", 7) == 0)
		name = jit_name(s, p, addr, demangled, dsize, &raw);
	loc->unnamed = 0;
	loc->system_name = name ? raw : NULL;
	if (!name) {
		/*
		 * No symbol: the frame keeps its identity as "libfoo.so+0x1a2b", the ELF address,
		 * so backends draw it and a later symbolizer can name it. A file that could not be
		 * read gives its file offset instead, which is the ELF address of the text of
		 * almost every library.
		 */
		if (syms)
			s->stats.frames_no_symbol++;
		s->stats.unnamed++;
		if (!placed)
			vaddr = addr - m->start + m->offset;
		snprintf(placeholder, psize, "%s+0x%llx", base_name(m->path),
			 (unsigned long long)vaddr);
		name = placeholder;
		loc->unnamed = s->opts.addresses_only ? PP_UNNAMED_FOR_BACKEND : PP_UNNAMED_DRAWN;
	}
	mi.load_bias = addr - vaddr;
	mi.start = m->start;
	mi.limit = m->end;
	mi.file_offset = m->offset;
	mi.filename = m->path;
	mi.build_id = syms ? pp_elf_symbols_build_id(syms) : "";
	/* a placeholder's mapping becomes the file's: its other frames follow, none is left */
	loc->mapping_id = placeholder_mapping
			      ? pp_profile_resolve_mapping(s->profile, placeholder_mapping, &mi)
			      : pp_profile_intern_mapping(s->profile, &mi);
	loc->address = vaddr;
	loc->function = name;
}

/*
 * Frames of files the side-band named are also cached by file: under this pid (no process
 * has it), keyed by the file's identity and the frame's file offset. The identity stands for
 * the file for an epoch of FILE_FRAME_EPOCH_NS (an inode number reused by another file
 * misleads it no longer), as in the symbol cache.
 */
#define FILE_FRAME_PID UINT32_MAX

/* location as the frame at file offset off of the file whose frames' key is file_key */
static void file_frame_put(struct pp_session *s, uint64_t file_key, uint64_t off, uint32_t location)
{
	frame_cache_put(s, frame_slot(s, FILE_FRAME_PID, file_key, off), FILE_FRAME_PID, file_key,
			off, location);
}

/* Remember a placeholder to finish when its file's table comes (MAX_PENDING_LOCATIONS). */
static void note_pending(struct pp_session *s, uint64_t tag, uint32_t location, uint64_t addr,
			 const struct pp_map_entry *m, uint64_t file_key)
{
	s->stats.frames_pending++;
	if (s->npending == MAX_PENDING_LOCATIONS ||
	    pp_vec_reserve((void **)&s->pending, &s->pending_cap, s->npending, sizeof(*s->pending),
			   256, MAX_PENDING_LOCATIONS))
		return;
	s->pending[s->npending++] = (struct pending_loc){.tag = tag,
							 .addr = addr,
							 .start = m->start,
							 .end = m->end,
							 .offset = m->offset,
							 .file_key = file_key,
							 .location = location};
}

/* A placeholder made while its file was read, finished with the file's table (NULL: none). */
static void finish_pending(struct pp_session *s, const struct pending_loc *pl,
			   const struct pp_elf_symbols *syms)
{
	const struct pp_location_info *old = pp_profile_get_location(s->profile, pl->location);
	const struct pp_mapping_info *om;
	struct pp_location_info loc;
	struct pp_map_entry m = {0};
	char placeholder[300], demangled[1024];

	if (!old || !old->unnamed || !old->mapping_id)
		return;
	om = pp_profile_get_mapping(s->profile, old->mapping_id);
	m.start = pl->start;
	m.end = pl->end;
	m.offset = pl->offset;
	m.path = om->filename;
	m.kind = PP_MAP_KIND_FILE;
	loc = *old;
	s->stats.unnamed--; /* counted again, as what it is now */
	file_frame(s, syms, pl->addr, &m, NULL, &loc, placeholder, sizeof(placeholder), demangled,
		   sizeof(demangled), old->mapping_id);
	if (!loc.mapping_id || pp_profile_resolve_location(s->profile, pl->location, &loc) != 0)
		return;
	s->stats.frames_resolved++;
	/*
	 * Named from its file: the frame of every process that maps the file there, found without
	 * a symbol request of their own (under churn most frames are first made this way).
	 */
	if (syms && pl->file_key)
		file_frame_put(s, pl->file_key, pp_map_file_offset(&m, pl->addr), pl->location);
}

static uint64_t file_frame_key(const struct pp_session *s, const struct pp_map_entry *m)
{
	uint64_t k = pp_mix64(((uint64_t)m->dev_major << 32 | m->dev_minor) ^ pp_mix64(m->inode));

	return pp_mix64(k ^ pp_mix64(m->ino_generation + s->file_frame_epoch)) | 1;
}

static uint32_t user_location(struct pp_session *s, const struct pp_proc *p, uint64_t addr)
{
	struct frame_slot *slot;
	const struct pp_map_entry *m;
	struct pp_location_info loc = {0};
	char placeholder[300], demangled[1024];
	uint64_t vaddr = addr, pending = 0;
	const char *name = NULL;
	int not_code = 0, jit_unnamed = 0;
	uint64_t file_key = 0, file_off = 0;
	uint32_t id;

	if (!p) {
		loc.address = addr;
		loc.function = "[unknown]";
		loc.kind = PP_FRAME_NATIVE;
		return pp_profile_intern_location(s->profile, &loc);
	}
	slot = frame_slot(s, p->pid, p->generation, addr);
	if (slot->location) {
		s->stats.frames_cached++;
		return slot->location;
	}
	m = pp_proc_cache_find_map(s->procs, p, addr);
	/*
	 * A file the side-band named: the frame is the same in every process that maps it, so
	 * the thousandth run of a program costs a lookup per frame, not a symbol request.
	 */
	if (m && m->from_sideband && m->kind == PP_MAP_KIND_FILE && (m->perms & PP_MAP_EXEC) &&
	    m->inode) {
		struct frame_slot *fs;

		file_key = file_frame_key(s, m);
		file_off = pp_map_file_offset(m, addr);
		fs = frame_slot(s, FILE_FRAME_PID, file_key, file_off);
		if (fs->location) {
			s->stats.frames_cached++;
			id = fs->location;
			frame_cache_put(s, frame_slot(s, p->pid, p->generation, addr), p->pid,
					p->generation, addr, id);
			return id;
		}
	}
	if (!m) {
		s->stats.frames_unmapped++;
		s->stats.unnamed++;
		name = "[unknown]";
	} else if (!(m->perms & PP_MAP_EXEC)) {
		/*
		 * Code runs only from executable mappings: a return address in the heap, a stack
		 * or a file's data is an unwinding error (a frame pointer that was not one), not
		 * JIT code. The walk ends here; handle_sample keeps this frame as its marker.
		 */
		name = PP_FRAME_NOT_CODE;
		not_code = 1;
	} else if (m->kind == PP_MAP_KIND_FILE) {
		const struct pp_elf_symbols *syms = mapping_symbols(s, p, m, &pending);

		/*
		 * A file this process could not open (gone, its root unreachable): its frame is
		 * not kept by file. It is the same in every process only when named from the
		 * file, and a placeholder kept so would stand for the frame in every later process
		 * that maps the file, where its symbols can be read.
		 */
		if (!syms && !pending) {
			s->stats.frames_no_file++;
			file_key = 0;
		}
		file_frame(s, syms, addr, m, p, &loc, placeholder, sizeof(placeholder), demangled,
			   sizeof(demangled), 0);
		name = loc.function;
		vaddr = loc.address;
		if (!loc.unnamed)
			pending = 0;
	} else if (m->kind == PP_MAP_KIND_VDSO && pp_vdso_serves(&s->vdso, m->start, m->end)) {
		file_frame(s, s->vdso.syms, addr, m, p, &loc, placeholder, sizeof(placeholder),
			   demangled, sizeof(demangled), 0);
		name = loc.function;
		vaddr = loc.address;
	} else {
		if (m->kind == PP_MAP_KIND_ANON || m->kind == PP_MAP_KIND_HEAP)
			name = jit_name(s, p, addr, demangled, sizeof(demangled), &loc.system_name);
		if (!name) {
			s->stats.frames_no_symbol++;
			s->stats.unnamed++;
		}
		switch (name ? -1 : m->kind) {
		case -1:
			break;
		case PP_MAP_KIND_VDSO:
			name = "[vdso]";
			break;
		case PP_MAP_KIND_HEAP:
		case PP_MAP_KIND_STACK:
		case PP_MAP_KIND_ANON:
			/* JIT or other generated code: by address, so frames do not merge */
			snprintf(placeholder, sizeof(placeholder), "[anonymous code]+0x%llx",
				 (unsigned long long)addr);
			name = placeholder;
			jit_unnamed = m->kind != PP_MAP_KIND_STACK && s->perf_maps;
			break;
		default:
			name = "[unknown]";
		}
	}
	/* one marker location per window, whatever the bad address was */
	loc.address = not_code ? 0 : vaddr;
	loc.function = name;
	loc.kind = PP_FRAME_NATIVE;
	id = pp_profile_intern_location(s->profile, &loc);
	if (id && not_code)
		s->not_code_loc = id;
	if (id && pending)
		note_pending(s, pending, id, addr, m, file_key);
	if (id && jit_unnamed && s->njit < MAX_JIT_UNNAMED &&
	    !pp_vec_reserve((void **)&s->jit, &s->jit_cap, s->njit, sizeof(*s->jit), 64,
			    MAX_JIT_UNNAMED))
		s->jit[s->njit++] = (struct jit_unnamed){addr, p->generation, p->pid, id};
	if (id) {
		/* find_map may have reloaded the maps; the slot pointer is still ours. */
		frame_cache_put(s, frame_slot(s, p->pid, p->generation, addr), p->pid,
				p->generation, addr, id);
		if (file_key && !pending)
			file_frame_put(s, file_key, file_off, id);
	}
	return id;
}

static uint32_t data_loc_named(struct pp_session *s, const char *name, uint64_t address)
{
	struct pp_location_info loc = {
	    .address = address,
	    .function = name,
	    .kind = PP_FRAME_DATA,
	};

	return pp_profile_intern_location(s->profile, &loc);
}

/* Name the profile's unnamed locations in the file whose build id is id from its debug file. */
static size_t name_from_debug_table(struct pp_session *s, const struct pp_elf_symbols *dbg,
				    const char *id)
{
	size_t nlocs = pp_profile_location_count(s->profile), named = 0;
	char demangled[1024];

	for (uint32_t lid = 1; lid <= nlocs; lid++) {
		const struct pp_location_info *l = pp_profile_get_location(s->profile, lid);
		const struct pp_mapping_info *m;
		const char *name, *raw;

		if (!l->unnamed || !l->mapping_id)
			continue;
		m = pp_profile_get_mapping(s->profile, l->mapping_id);
		if (strcasecmp(m->build_id, id) != 0)
			continue;
		raw = pp_elf_symbols_lookup(dbg, l->address, NULL);
		name = pp_demangle(raw, demangled, sizeof(demangled));
		if (name && pp_profile_name_location(s->profile, lid, name, raw) == 0)
			named++;
	}
	s->stats.named_late += named;
	s->stats.named[PP_NAMED_DEBUGINFOD] += named;
	if (s->stats.unnamed >= named)
		s->stats.unnamed -= named;
	return named;
}

/* Whether the process a frame was taken in has exited (or its pid is another's now). */
static bool jit_process_gone(struct pp_session *s, const struct jit_unnamed *j)
{
	const struct pp_proc *p = pp_proc_cache_peek(s->procs, j->pid);

	return !p || p->generation != j->generation || (p->flags & PP_PROC_F_EXITED);
}

/*
 * Anonymous code no perf map named when it was first seen: asked of the map again (its
 * reader rereads a map that grew or was rewritten, rate-limited), named in place when it
 * answers. A process that exited is asked once more, then no longer: its map can only be
 * opened through its /proc entry, and on a node that keeps starting JIT runtimes the frames
 * of the gone ones would otherwise cost a read of /proc every second until the window closed.
 */
static void retry_jit_names(struct pp_session *s)
{
	char demangled[1024];

	s->jit_retry_ns = mono_ms() * 1000000ull;
	for (size_t i = 0; i < s->njit;) {
		const struct jit_unnamed *j = &s->jit[i];
		const char *raw = pp_perf_maps_lookup(s->perf_maps, j->pid, j->generation, j->addr);
		const char *name = raw ? pp_demangle(raw, demangled, sizeof(demangled)) : NULL;

		if (!name || !s->profile ||
		    pp_profile_name_location(s->profile, j->location, name, raw) != 0) {
			if (!jit_process_gone(s, j)) {
				i++;
				continue;
			}
			s->stats.jit_given_up++;
		} else {
			s->stats.named_late++;
			s->stats.named[PP_NAMED_PERF_MAP]++;
			if (s->stats.unnamed)
				s->stats.unnamed--;
		}
		s->jit[i] = s->jit[--s->njit];
	}
}

/* The loader's results so far: placeholders finished, slots filled, debug files applied. */
static void apply_data_type(struct pp_session *s, const struct pp_symload_result *r)
{
	struct dtype_slot *slot;

	if (!s->dtypes)
		return;
	slot = &s->dtypes[r->tag & (DTYPE_SLOTS - 1)];
	if (slot->state != DTYPE_PENDING || slot->tag != r->tag)
		return; /* the slot went to another instruction */
	if (r->err == EINPROGRESS) {
		slot->state = DTYPE_EMPTY; /* the kernel's image is on its way: asked again */
		return;
	}
	slot->state = DTYPE_DONE;
	slot->miss = (uint8_t)r->type_miss;
	if (r->type_miss == PP_DT_RESOLVED) {
		snprintf(slot->type, sizeof(slot->type), "%s", r->type.type);
		pp_data_type_format(&r->type, slot->leaf, sizeof(slot->leaf));
	}
}

static void apply_symbol_results(struct pp_session *s)
{
	struct pp_symload_result r[64];
	size_t n;

	while ((n = pp_symloader_take(s->loader, r, 64)) > 0) {
		/* one pass over the placeholders for the whole batch */
		for (size_t i = 0; i < s->npending;) {
			size_t k = 0;

			while (k < n &&
			       (r[k].kind != PP_SYMLOAD_MAPPING || r[k].tag != s->pending[i].tag))
				k++;
			if (k == n) {
				i++;
				continue;
			}
			if (s->profile)
				finish_pending(s, &s->pending[i], r[k].syms);
			s->pending[i] = s->pending[--s->npending];
		}
		for (size_t k = 0; k < n; k++) {
			struct mapsym_slot *slot = &s->mapsyms[r[k].tag & (MAPSYM_SLOTS - 1)];

			if (r[k].kind == PP_SYMLOAD_DATA_TYPE) {
				apply_data_type(s, &r[k]);
			} else if (r[k].kind == PP_SYMLOAD_DEBUG) {
				if (r[k].syms && s->profile)
					name_from_debug_table(s, r[k].syms, r[k].build_id);
				pp_elf_symbols_free(r[k].syms);
			} else if (slot->state == MAPSYM_PENDING && slot->tag == r[k].tag) {
				slot->state = MAPSYM_READY;
				slot->syms = r[k].syms; /* the slot owns the reference now */
				if (slot->named && slot->syms)
					idsym_put(s, &slot->id, slot->syms);
			} else {
				pp_elf_symbols_free(
				    r[k].syms); /* the slot went to another mapping */
			}
		}
	}
}

size_t pp_session_apply_debug(struct pp_session *s)
{
	char ids[16][PP_BUILD_ID_HEX_SIZE];
	size_t n, asked = 0;

	if (!s)
		return 0;
	if (s->opts.debuginfod) {
		while ((n = pp_debuginfod_take_ready(s->opts.debuginfod, ids, 16)) > 0) {
			for (size_t i = 0; i < n; i++) {
				/* new frames of the file: its table is read again, with the debug
				 * file; the ones already made are named from the debug file */
				pp_symloader_forget_build_id(s->loader, ids[i]);
				asked += pp_symloader_submit_debug(s->loader, 0, ids[i]) == 0;
			}
		}
	}
	apply_symbol_results(s);
	return asked;
}

size_t pp_session_wait_debug(struct pp_session *s, uint64_t timeout_ms)
{
	uint64_t before;

	if (!s || !s->opts.debuginfod)
		return 0;
	before = s->stats.named_late;
	(void)pp_debuginfod_wait_idle(s->opts.debuginfod, timeout_ms);
	pp_session_apply_debug(s);
	pp_session_wait_symbols(s, timeout_ms);
	return (size_t)(s->stats.named_late - before);
}

void pp_session_kernel_modules(struct pp_session *s, uint32_t *typed, uint32_t *untyped, char *why,
			       size_t why_size)
{
	pp_symloader_kernel_modules(s ? s->loader : NULL, typed, untyped, why, why_size);
}

int pp_session_kernel_image(struct pp_session *s, char *why, size_t why_size)
{
	if (why && why_size)
		why[0] = '\0';
	return s ? pp_symloader_kernel_image(s->loader, why, why_size) : 0;
}

int pp_session_wait_symbols(struct pp_session *s, uint64_t timeout_ms)
{
	int ret;

	if (!s)
		return 0;
	ret = pp_symloader_wait_idle(s->loader, timeout_ms);
	apply_symbol_results(s);
	return ret;
}

/*
 * The ELF data symbol of file mapping fm covering addr, as a location (0: none). The table
 * comes from mapping_symbols, which keeps it per process mapping; the entry only remembers a
 * file that could not be read, so it is counted and asked for once.
 */
static uint32_t data_symbol_location(struct pp_session *s, const struct pp_proc *p,
				     struct pp_mem_obj *obj, const struct pp_map_entry *fm,
				     uint64_t addr)
{
	const struct pp_elf_symbols *syms;
	uint64_t vaddr, start, pending;
	const char *name;

	if (obj->syms_state == PP_MEM_SYMS_NONE)
		return 0;
	syms = mapping_symbols(s, p, fm, &pending);
	if (!syms) {
		if (pending)
			return 0; /* its mapping's class for now: the table is on its way */
		obj->syms_state = PP_MEM_SYMS_NONE;
		s->stats.frames_no_file++;
		return 0;
	}
	if (pp_elf_symbols_map_addr(syms, addr, fm->start, fm->offset, &vaddr))
		return 0;
	name = pp_elf_symbols_lookup_data(syms, vaddr, &start);
	if (!name)
		return 0;
	/* Hot globals repeat: skip demangling and interning the name again. */
	if (!obj->last_loc || obj->last_sym_start != start) {
		char demangled[1024];

		obj->last_loc =
		    data_loc_named(s, pp_demangle(name, demangled, sizeof(demangled)), start);
		obj->last_sym_start = start;
	}
	return obj->last_loc;
}

/*
 * The data-object frame of a memory sample's data address: an ELF data symbol of the mapped
 * file (a .bss past its page is an anonymous mapping named by the file before it), else the
 * mapping's class; "[kernel]" and "[unknown]" otherwise. 0 only when the profile is out of
 * memory.
 */
static uint32_t data_location(struct pp_session *s, const struct pp_proc *p, uint64_t addr)
{
	const struct pp_map_entry *m, *fm;
	struct pp_mem_obj_key key;
	struct pp_mem_obj *obj;
	uint32_t id;

	if (pp_mem_addr_is_kernel(addr)) {
		s->stats.data_kernel++;
		if (!s->data_kernel_loc)
			s->data_kernel_loc = data_loc_named(s, PP_MEM_OBJ_KERNEL, 0);
		return s->data_kernel_loc;
	}
	m = p ? pp_proc_cache_find_map(s->procs, p, addr) : NULL;
	if (!m) {
		s->stats.data_unmapped++;
		if (!s->data_unknown_loc)
			s->data_unknown_loc = data_loc_named(s, PP_MEM_OBJ_UNKNOWN, 0);
		return s->data_unknown_loc;
	}
	key = (struct pp_mem_obj_key){
	    .generation = p->generation,
	    .start = m->start,
	    .end = m->end,
	    .offset = m->offset,
	    .inode = m->inode,
	    .pid = p->pid,
	};
	obj = pp_mem_objcache_get(s->objs, &key);
	fm = m->kind == PP_MAP_KIND_FILE ? m : pp_mem_bss_owner(p->maps.entries, p->maps.n, m);
	if (fm) {
		id = data_symbol_location(s, p, obj, fm, addr);
		if (id) {
			s->stats.data_symbols++;
			return id;
		}
	}
	s->stats.data_classes++;
	if (!obj->class_loc) {
		char name[300];

		obj->class_loc = data_loc_named(s, pp_mem_map_class(m, name, sizeof(name)), 0);
	}
	return obj->class_loc;
}

/* The slot of the kernel's own instructions: a device no file has. */
#define DTYPE_KERNEL_DEV UINT32_MAX
/* ... and of its modules' (by their addresses; the inode a digest of the module's name) */
#define DTYPE_KMOD_DEV (UINT32_MAX - 1)

static uint64_t name_digest(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
	return h;
}

/*
 * The data type and field of the access at the exact IP ip: from the loader's answer for that
 * instruction, asked for at its first sample: of its file (device, inode, file offset) for a
 * user address of process p, of the kernel's image (DTYPE_KERNEL_DEV, offset from _stext)
 * for a kernel one. Until then, and where there is none, the sample keeps its data object's
 * frame.
 */
static void data_type_frames(struct pp_session *s, const struct pp_proc *p, uint64_t ip, int kernel,
			     struct mem_info *mi)
{
	const struct pp_map_entry *m = NULL;
	const char *module = NULL, *ksym = NULL;
	uint64_t off, tag, inode = 0, ksym_addr = 0;
	struct dtype_slot *slot;
	uint32_t dev = DTYPE_KERNEL_DEV;
	size_t i;

	if (kernel) {
		/* once: where kallsyms says _stext is, KASLR's slide included */
		if (!s->ktext_looked) {
			s->ktext_looked = 1;
			if (pp_kallsyms_find(s->opts.kallsyms, "_stext", &s->ktext) &&
			    pp_kallsyms_find(s->opts.kallsyms, "_text", &s->ktext))
				s->ktext = 0;
		}
		if (!s->ktext || ip < s->ktext) {
			s->stats.data_untyped[PP_DT_NO_CODE]++;
			return;
		}
		if ((ksym = pp_kallsyms_lookup(s->opts.kallsyms, ip, &ksym_addr, &module)) &&
		    module) {
			if (!s->opts.kernel_image || !pp_kmod_name_valid(module)) {
				s->stats.data_untyped[PP_DT_KERNEL_MODULE]++;
				return;
			}
			/* a module's instructions, named by their address (its sections') */
			dev = DTYPE_KMOD_DEV;
			inode = name_digest(module);
			off = ip;
		} else {
			module = NULL;
			off = ip - s->ktext;
		}
	} else {
		m = pp_proc_cache_find_map(s->procs, p, ip);
		if (!m || m->kind != PP_MAP_KIND_FILE || !m->path) {
			s->stats.data_untyped[PP_DT_NO_CODE]++;
			return;
		}
		off = ip - m->start + m->offset;
		dev = (uint32_t)m->dev_major << 20 | m->dev_minor;
		inode = m->inode;
	}
	i = pp_mix64(inode ^ (off * 0x9e3779b97f4a7c15ull) ^ dev) & (DTYPE_SLOTS - 1);
	slot = &s->dtypes[i];
	if (slot->state == DTYPE_EMPTY || slot->inode != inode || slot->dev != dev ||
	    slot->file_offset != off) {
		int err;

		tag = ++s->next_tag << DTYPE_SLOT_BITS | i;
		err = module ? pp_symloader_submit_kmod_data_type(s->loader, tag, module, off, ksym,
								  ksym_addr)
		      : kernel ? pp_symloader_submit_kernel_data_type(s->loader, tag, off)
			       : pp_symloader_submit_data_type(s->loader, tag, p->pid, p->relatives,
							       m, off);
		if (err)
			return; /* the queue is full: asked again at the next sample */
		*slot = (struct dtype_slot){.inode = inode,
					    .file_offset = off,
					    .tag = tag,
					    .dev = dev,
					    .state = DTYPE_PENDING};
	}
	if (slot->state == DTYPE_PENDING) {
		s->stats.data_type_pending++;
		return;
	}
	if (slot->miss != PP_DT_RESOLVED) {
		s->stats.data_untyped[slot->miss < PP_DT_MISS__COUNT ? slot->miss : 0]++;
		return;
	}
	if (!slot->field_loc) {
		slot->type_loc = data_loc_named(s, slot->type, 0);
		slot->field_loc = data_loc_named(s, slot->leaf, 0);
	}
	if (!slot->field_loc || !slot->type_loc)
		return;
	mi->data_loc = slot->field_loc;
	mi->type_loc = slot->type_loc;
	s->stats.data_typed++;
}

/* Memory fields of a sample -> its data-object frame, label key and latency. */
static void mem_prepare(struct pp_session *s, const struct pp_proc *p, const struct pp_sample *rec,
			struct mem_info *mi)
{
	struct pp_mem_sample ms;

	if (!pp_mem_sample_get(rec, &ms)) {
		s->stats.mem_no_fields++;
		return;
	}
	s->stats.mem_samples++;
	if (ms.has_addr)
		mi->data_loc = data_location(s, p, ms.addr);
	else
		s->stats.mem_no_addr++;
	if (rec->ip && (rec->flags & PP_SF_EXACT_IP)) {
		if (!(rec->flags & PP_SF_KERNEL_IP)) {
			if (p)
				data_type_frames(s, p, rec->ip, 0, mi);
		} else if (s->opts.kernel_image && s->opts.kallsyms && s->loader) {
			data_type_frames(s, p, rec->ip, 1, mi);
		} else {
			s->stats.data_untyped[PP_DT_NO_FILE]++;
		}
	}
	mi->label_key = pp_mem_label_key(&ms);
	if (ms.has_latency) {
		mi->latency = ms.latency;
		s->stats.mem_latency_samples++;
	}
}

/* Keeps a newly symbolized raw stack; flushes the table first when it is full. */
static int raw_store(struct pp_session *s, struct raw_stack **slot, const struct pp_decoded *d,
		     uint64_t hash, uint64_t generation, const struct pp_sample_info *si,
		     const struct mem_info *mi)
{
	const struct pp_sample *rec = &d->sample;
	uint32_t n = (uint32_t)rec->nr_kstack + rec->nr_ustack;
	struct raw_stack *e;

	if (s->raw_used + 1 > s->raw_cap / 2 || s->raw_bytes > RAW_STACK_MAX_BYTES) {
		pp_session_flush(s);
		slot = raw_slot(s, d, hash, generation, mi);
	}
	/* One allocation: the entry, its raw frames, then its location ids. */
	size_t path_len = si->process_path ? strlen(si->process_path) + 1 : 1;

	size_t bytes =
	    sizeof(*e) + n * sizeof(*e->frames) + si->nlocations * sizeof(*e->locs) + path_len;

	e = malloc(bytes);
	if (!e)
		return -ENOMEM;
	e->bytes = bytes;
	s->raw_bytes += bytes;
	e->frames = (uint64_t *)(e + 1);
	e->locs = (uint32_t *)(e->frames + n);
	e->process_path = memcpy((char *)(e->locs + si->nlocations),
				 si->process_path ? si->process_path : "", path_len);
	for (uint32_t i = 0; i < n; i++)
		e->frames[i] = pp_decoded_frame(d, i);
	memcpy(e->locs, si->locations, si->nlocations * sizeof(*e->locs));
	e->hash = hash;
	e->generation = generation;
	e->count = si->count;
	e->value = si->value;
	e->latency = si->latency;
	e->label_key = mi->label_key;
	e->cgroup_id = raw_cgroup(s, d);
	e->data_loc = mi->data_loc;
	e->first_time = si->first_time_unix_ns;
	e->tgid = rec->tgid;
	e->tid = rec->tid;
	e->cpu = raw_cpu(s, d);
	e->flags = rec->flags & PP_SF_KERNEL_IP;
	e->nframes = (uint16_t)n;
	e->nk = rec->nr_kstack;
	e->nlocs = (uint16_t)si->nlocations;
	e->process_kind = si->process_kind;
	e->wait = si->wait;
	e->ip = rec->ip;
	memcpy(e->comm, rec->comm, sizeof(e->comm));
	e->comm[sizeof(e->comm) - 1] = '\0';
	snprintf(e->process_name, sizeof(e->process_name), "%s", si->process_name);
	*slot = e;
	s->raw_used++;
	return 0;
}

/*
 * Whether a kernel frame is the tracing machinery's: an off-CPU record taken in the switch
 * tracepoint (kernels without kprobes) starts with the shim's program and its caller, which
 * are not where the thread waits; one taken at schedule's return, with its trampoline.
 */
static bool is_tracing_frame(struct pp_session *s, uint32_t loc)
{
	static const char *const prefixes[] = {"bpf_prog_", "bpf_trace_run", "__bpf_trace_",
					       "__traceiter_", "bpf_trampoline_"};
	const struct pp_location_info *l = loc ? pp_profile_get_location(s->profile, loc) : NULL;

	for (size_t i = 0; l && i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(l->function, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/*
 * An off-CPU record's kernel stack (locs[first..n)) less the tracing machinery at its leaf:
 * the frames up to the last tracing frame there, with the unnamed ones among them (a BPF
 * program or trampoline the kernel names not, before 5.12). The new n.
 */
static uint32_t drop_tracing_frames(struct pp_session *s, uint32_t *locs, uint32_t first,
				    uint32_t n)
{
	uint32_t drop = 0;

	for (uint32_t i = first; i < n; i++) {
		const struct pp_location_info *l = pp_profile_get_location(s->profile, locs[i]);

		if (is_tracing_frame(s, locs[i]))
			drop = i - first + 1;
		else if (!l || strcmp(l->function, "[kernel]") != 0)
			break;
	}
	if (!drop)
		return n;
	memmove(locs + first, locs + first + drop, (n - first - drop) * sizeof(*locs));
	return n - drop;
}

/* A sample of tgid (proc: its process, NULL where none is known) for the unwind tables. */
static void note_unwinder(struct pp_session *s, const struct pp_proc *proc, uint32_t tgid)
{
	if (proc && !(proc->flags & PP_PROC_F_REPLACED))
		pp_unwinder_note_proc(s->opts.unwinder, proc);
	else if (!proc)
		pp_unwinder_note(s->opts.unwinder, tgid);
}

/*
 * The image whose mappings name a sample's user frames: its process's, but for a sample taken
 * in an exec, in the kernel after the exec was reported and before the new image ran. Its
 * user registers are still those of the image that called exec, while its memory is already
 * the new image's: its pc is named in that image, and the frames above it, read from the new
 * memory, are dropped (*nu 1).
 */
static const struct pp_proc *exec_caller(struct pp_session *s, const struct pp_decoded *d,
					 const struct pp_proc *proc, uint32_t *nu)
{
	const struct pp_proc *before;
	uint64_t pc;

	if (!proc || !*nu || !(d->sample.flags & PP_SF_KERNEL_IP))
		return proc;
	pc = pp_decoded_frame(d, d->sample.nr_kstack);
	if (pp_maps_find(&proc->maps, pc) ||
	    !(before = pp_proc_cache_image_before(s->procs, proc)) ||
	    !pp_maps_find(&before->maps, pc))
		return proc;
	*nu = 1;
	s->stats.samples_in_exec++;
	return before;
}

static int handle_sample(struct pp_session *s, const struct pp_decoded *d)
{
	const struct pp_sample *rec = &d->sample;
	uint32_t locs[MAX_FRAMES], n = 0, first_kernel;
	uint32_t nk = rec->nr_kstack, nu = rec->nr_ustack;
	int in_kernel = !!(rec->flags & PP_SF_KERNEL_IP);
	const struct pp_proc *proc = NULL, *uproc;
	struct raw_stack **raw = NULL;
	uint64_t hash = 0;
	struct pp_sample_info si = {0};
	struct mem_info mi = {0};
	struct pp_mem_labels ml;
	char process_name[PP_PROC_COMM_LEN + 2];
	int ret;

	/* Records built by hand (not by pp_record_decode) must respect the shim's bounds too. */
	if (nk > PP_MAX_STACK_DEPTH || nu > PP_MAX_STACK_DEPTH)
		return -EINVAL;
	if (rec->tgid) {
		proc = pp_proc_cache_get_at(s->procs, rec->tgid, rec->time_ns);
		if (!proc && (errno == EACCES || errno == EPERM))
			s->stats.samples_unreadable++; /* there, but not ours to read */
		else if (!proc && errno == ESTALE)
			s->stats.samples_of_images_not_kept++;
		else if (!proc)
			s->stats.samples_no_process++;
		else if ((proc->flags & (PP_PROC_F_NO_MAPS | PP_PROC_F_NO_EXE)) &&
			 !(proc->flags & PP_PROC_F_KTHREAD))
			s->stats.samples_unreadable++;
		/* an image no longer kept (ESTALE) needs nothing of the process it became */
		if (proc || errno != ESTALE)
			note_unwinder(s, proc, rec->tgid);
		if (proc && (proc->flags & PP_PROC_F_REPLACED))
			s->stats.samples_of_replaced_images++;
	}
	if (s->objs && (rec->flags & PP_SF_MEM_FIELDS))
		mem_prepare(s, proc, rec, &mi);
	if (s->raw) {
		uint64_t gen = proc ? proc->generation : 0;

		hash = raw_hash(d, gen, raw_cpu(s, d), raw_cgroup(s, d), &mi);
		raw = raw_slot(s, d, hash, gen, &mi);
		if (*raw) {
			(*raw)->count++;
			(*raw)->value += rec->period;
			(*raw)->latency += mi.latency;
			s->stats.raw_stack_hits++;
			s->stats.samples++;
			s->stats.off_cpu_samples += (*raw)->wait != PP_WAIT_NONE;
			return 0;
		}
	}

	/*
	 * The data object a memory sample touched is the leaf-most frame; where its type is
	 * known, the leaf is the field and the type is the frame above it, so flame graphs group
	 * the fields of a type.
	 */
	if (mi.data_loc)
		locs[n++] = mi.data_loc;
	if (mi.type_loc)
		locs[n++] = mi.type_loc;
	/* Kernel frames, leaf first. The precise ip replaces the PMI ip at the leaf. */
	first_kernel = n;
	for (uint32_t i = 0; i < nk; i++) {
		uint64_t addr = pp_decoded_frame(d, i);

		if (i == 0 && in_kernel && s->opts.precise_ip && rec->ip)
			addr = rec->ip;
		/* Return addresses point after the call: name the call instruction's function. */
		if (i > 0 && addr)
			addr -= 1;
		locs[n] = kernel_location(s, addr);
		s->stats.frames++;
		if (locs[n])
			n++;
	}
	if (rec->flags & PP_SF_OFF_CPU)
		n = drop_tracing_frames(s, locs, first_kernel, n);
	if (in_kernel && nk == 0) {
		locs[n] = kernel_location(s, rec->ip);
		if (locs[n])
			n++;
		s->stats.frames++;
	}
	if (!in_kernel && nu == 0) {
		locs[n] = user_location(s, proc, rec->ip);
		if (locs[n])
			n++;
		s->stats.frames++;
	}
	uproc = exec_caller(s, d, proc, &nu);
	for (uint32_t i = 0; i < nu; i++) {
		uint64_t addr = pp_decoded_frame(d, nk + i);

		if (i == 0 && !in_kernel && s->opts.precise_ip && rec->ip)
			addr = rec->ip;
		/*
		 * The first user frame is where user code was stopped (its saved registers' ip),
		 * not a return address, also under a kernel stack: a fault at a function's first
		 * instruction is that function's, and a system call's ip is past its instruction,
		 * in the same function.
		 */
		if (i > 0 && addr)
			addr -= 1;
		locs[n] = user_location(s, uproc, addr);
		s->stats.frames++;
		/* the marker is interned once per window, so its id tells it apart */
		if (locs[n] && locs[n] == s->not_code_loc) {
			/* the rest of the walk is built on a bad frame: end it, flagged */
			s->stats.samples_walk_ended++;
			n++;
			break;
		}
		if (locs[n])
			n++;
	}

	if (proc && proc->exe && proc->exe[0])
		snprintf(process_name, sizeof(process_name), "%s", base_name(proc->exe));
	else if (proc && proc->comm[0])
		snprintf(process_name, sizeof(process_name), "[%s]", proc->comm);
	else
		snprintf(process_name, sizeof(process_name), "%s",
			 rec->tgid ? rec->comm : "[idle]");

	si.locations = locs;
	si.nlocations = n;
	si.pid = rec->tgid;
	si.tid = rec->tid;
	si.thread_name = rec->comm;
	si.process_name = process_name;
	si.process_path = proc && proc->exe ? proc->exe : NULL;
	si.process_kind = !rec->tgid				      ? PP_PROCESS_IDLE
			  : proc && (proc->flags & PP_PROC_F_KTHREAD) ? PP_PROCESS_KERNEL_THREAD
								      : PP_PROCESS_PROGRAM;
	si.count = 1;
	si.value = rec->period;
	si.first_time_unix_ns = (uint64_t)((int64_t)rec->time_ns + s->opts.mono_to_wall_ns);
	if (si.first_time_unix_ns < pp_profile_get_desc(s->profile)->start_unix_ns)
		s->stats.samples_late++;
	si.has_cpu = (uint32_t) !!s->opts.per_cpu;
	si.cpu = rec->cpu;
	si.latency = mi.latency;
	si.wait = wait_of(rec);
	if (si.wait)
		s->stats.off_cpu_samples++;
	if (raw) {
		/* Resolve the container now, while its cgroup exists; the flush finds it cached. */
		if (s->opts.containers)
			pp_container_meta_lookup(s->opts.containers, cgroup_key(rec), rec->tgid,
						 proc ? proc->generation : 0);
		ret = raw_store(s, raw, d, hash, proc ? proc->generation : 0, &si, &mi);
		if (ret == 0) {
			s->stats.samples++;
			return 0;
		}
		/* Out of memory for the table: add this sample directly. */
	}
	if (mi.label_key) {
		si.nlabels = pp_mem_labels_from_key(mi.label_key, &ml);
		si.labels = ml.labels;
	}
	si.resource_id = resource_of(s, cgroup_key(rec), rec->tgid, proc ? proc->generation : 0);
	if (si.resource_id)
		s->stats.container_samples++;
	pp_session_drop_dimensions(s->opts.drop, &si, ml.labels);
	ret = pp_profile_add_sample(s->profile, &si);
	if (ret) {
		s->stats.add_errors++;
		return ret;
	}
	s->stats.samples++;
	return 0;
}

/* Whether pid is among the first n of the batch's processes. */
static int seen_earlier(const uint32_t *pids, size_t n, uint32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

void pp_session_handle_sideband(struct pp_session *s, const struct pp_sb_event *ev)
{
	struct pp_map_entry e = {0};

	switch (ev->kind) {
	case PP_SB_MMAP:
		e.start = ev->start;
		e.end = ev->start + ev->len;
		e.offset = ev->pgoff;
		e.dev_major = ev->dev_major;
		e.dev_minor = ev->dev_minor;
		e.inode = ev->inode;
		e.ino_generation = ev->ino_generation;
		e.from_sideband = 1;
		e.perms = (uint8_t)(((ev->prot & PROT_READ) ? PP_MAP_READ : 0) |
				    ((ev->prot & PROT_WRITE) ? PP_MAP_WRITE : 0) |
				    ((ev->prot & PROT_EXEC) ? PP_MAP_EXEC : 0) |
				    ((ev->flags & MAP_SHARED) ? PP_MAP_SHARED : 0));
		pp_map_entry_set_name(&e, ev->path);
		pp_proc_cache_on_sb_mmap(s->procs, ev->pid, ev->time_ns, &e);
		/* new code in a process: its unwind list is made before its samples come */
		if ((e.perms & PP_MAP_EXEC) && s->opts.eager_unwind &&
		    s->nsb_dirty < SB_DIRTY_MAX &&
		    (!s->nsb_dirty || s->sb_dirty[s->nsb_dirty - 1] != ev->pid))
			s->sb_dirty[s->nsb_dirty++] = ev->pid;
		break;
	case PP_SB_COMM:
		if (ev->exec) {
			pp_proc_cache_on_sb_exec(s->procs, ev->pid, ev->comm, ev->time_ns);
			if (ev->pid == s->launcher_tgid && !s->launcher_exec_ns)
				s->launcher_exec_ns = ev->time_ns ? ev->time_ns : 1;
		} else if (ev->pid == ev->tid)
			pp_proc_cache_on_sb_comm(s->procs, ev->pid, ev->comm);
		break;
	case PP_SB_FORK:
		if (ev->pid == ev->tid && ev->pid != ev->ppid)
			pp_proc_cache_on_sb_fork(s->procs, ev->pid, ev->ppid, ev->time_ns);
		break;
	case PP_SB_EXIT:
		if (ev->pid == ev->tid)
			pp_proc_cache_on_exit(s->procs, ev->pid);
		break;
	case PP_SB_LOST:
		break;
	}
}

static void on_sideband(void *ctx, const struct pp_sb_event *ev)
{
	pp_session_handle_sideband(ctx, ev);
}

/*
 * Reads the side-band when a sample is newer than its last reading: what the sample's process
 * mapped, exec'd and forked before the sample is then known.
 */
static void sideband_catch_up(struct pp_session *s, uint64_t sample_ns)
{
	if (!s->opts.sideband || sample_ns < s->sb_read_ns)
		return;
	s->sb_read_ns = pp_clock_ns(CLOCK_MONOTONIC);
	if (s->sb_read_ns - s->file_frame_epoch_ns > FILE_FRAME_EPOCH_NS) {
		s->file_frame_epoch++;
		s->file_frame_epoch_ns = s->sb_read_ns;
	}
	s->nsb_dirty = 0;
	pp_sideband_drain(s->opts.sideband, on_sideband, s);
	for (size_t i = 0; i < s->nsb_dirty; i++) {
		uint32_t pid = s->sb_dirty[i];
		const struct pp_proc *p;

		/* a pid twice in the batch (mappings of two processes interleaved): once */
		if (seen_earlier(s->sb_dirty, i, pid))
			continue;
		p = pp_proc_cache_peek(s->procs, pid);
		if (!p || !(p->flags & PP_PROC_F_EVENTS) || (p->flags & PP_PROC_F_EXITED))
			continue;
		if (s->opts.profiled && !s->opts.profiled(s->opts.profiled_ctx, pid))
			continue;
		pp_unwinder_note_proc(s->opts.unwinder, p);
	}
}

void pp_session_read_sideband(struct pp_session *s)
{
	if (!s)
		return;
	pp_session_take_walked(s);
	if (s->opts.sideband)
		sideband_catch_up(s, UINT64_MAX);
	/* what this turn's records and reports queued, in one wake-up of each worker */
	pp_unwinder_kick(s->opts.unwinder);
	pp_symloader_kick(s->loader);
}

/*
 * An off-CPU record whose thread, once woken, waited long for a CPU (record.h): two samples
 * on its stacks, the wait in the state it slept in and the delay as runnable or throttled,
 * where one sample in that state would blame the sleep for the machine's business. It
 * counts as one record.
 */
static int handle_woken_wait(struct pp_session *s, const struct pp_decoded *d)
{
	struct pp_decoded delay = *d;
	uint64_t before = s->stats.samples;
	int ret = 0;

	if (d->sample.period)
		ret = handle_sample(s, d);
	delay.sample.period = d->sample.addr;
	delay.sample.weight =
	    d->sample.data_src == PP_OFF_CPU_THROTTLED ? PP_OFF_CPU_THROTTLED : PP_OFF_CPU_RUNNABLE;
	delay.sample.addr = 0;
	delay.sample.data_src = 0;
	if (!ret)
		ret = handle_sample(s, &delay);
	if (s->stats.samples > before + 1) {
		s->stats.samples--;
		s->stats.off_cpu_samples--;
	}
	s->stats.off_cpu_woken_late += !ret;
	return ret;
}

/* Whether a sample of the launcher's process is the launcher's (pp_session_skip_launcher). */
static bool from_launcher(const struct pp_session *s, const struct pp_sample *rec)
{
	if (rec->tgid != s->launcher_tgid)
		return false;
	if ((rec->flags & PP_SF_OFF_CPU) &&
	    rec->time_ns - rec->period - rec->addr < s->launcher_until_ns)
		return true; /* held on the pipe */
	/* before the exec it has our name; a command of the same name is told by the time */
	return s->launcher_comm[0] && !strncmp(rec->comm, s->launcher_comm, sizeof(rec->comm)) &&
	       (!s->launcher_exec_ns || rec->time_ns < s->launcher_exec_ns);
}

/*
 * A sample whose stack the shim copied (its process had no tables yet): the sample less the
 * copy goes to the unwinder, behind its process's install, and comes back walked
 * (pp_session_take_walked). 0, or -errno where it goes on as the shim walked it. A sample of
 * an image its process replaced by an exec since (a wrapper's: env, a shell before the
 * program it starts) is walked with a list of that image's mappings, not its process's,
 * which is the next image's; -ESTALE where those are not known (read from /proc, not
 * reported by the kernel).
 */
static int walk_later(struct pp_session *s, const struct pp_decoded *d, const struct pp_proc *proc)
{
	uint32_t frames = (uint32_t)d->sample.nr_kstack + d->sample.nr_ustack;
	uint8_t blob[PP_SAMPLE_MAX_SIZE];
	struct pp_sample head = d->sample;
	const struct pp_proc *image = NULL;
	int ret;

	if (frames > 2 * PP_MAX_STACK_DEPTH)
		return -EINVAL;
	if (proc && (proc->flags & PP_PROC_F_REPLACED)) {
		if (!(proc->flags & PP_PROC_F_EVENTS) || !proc->maps.n)
			return -ESTALE;
		image = proc;
	}
	head.flags &= (uint16_t)~PP_SF_USTACK_RAW;
	head.hdr.size = (uint32_t)(sizeof(head) + frames * sizeof(uint64_t));
	memcpy(blob, &head, sizeof(head));
	memcpy(blob + sizeof(head), d->stack_bytes, frames * sizeof(uint64_t));
	/* its install first, so that the walk queued after it finds the tables */
	if (!image)
		note_unwinder(s, proc, d->sample.tgid);
	ret = pp_unwinder_walk_later(
	    s->opts.unwinder, &(struct pp_unwind_later){
				  .tgid = d->sample.tgid,
				  .regs = {.rip = d->raw.ip, .rsp = d->raw.sp, .rbp = d->raw.bp},
				  .stack = d->raw_bytes,
				  .stack_base = d->raw.sp,
				  .stack_len = d->raw.len,
				  .blob = blob,
				  .blob_len = head.hdr.size,
				  .image = image,
			      });
	if (!ret && image)
		s->stats.copies_of_replaced_images++;
	return ret;
}

/*
 * A walked copy: its user frames replace the shim's where the walk used a table (it is right
 * as far as it goes; frame pointers of code built without them skip callers), and the sample
 * goes on to the profile.
 */
static void on_walked(void *ctx, const struct pp_unwind_walked *w)
{
	struct pp_session *s = ctx;
	uint64_t frames[2 * PP_MAX_STACK_DEPTH];
	struct pp_decode_stats again = {0}; /* decoded once already, counted then */
	struct pp_decoded d;
	uint32_t nk;

	/* the record walk_later made: the sample less its copy */
	if (pp_record_decode(w->blob, w->blob_len, &d, &again) || d.kind != PP_DECODED_SAMPLE)
		return;
	nk = d.sample.nr_kstack;
	memcpy(frames, d.stack_bytes, ((size_t)nk + d.sample.nr_ustack) * sizeof(uint64_t));
	if (w->status || !w->st.table_frames || !w->npcs) {
		s->stats.copies_no_tables++;
	} else {
		size_t nu = w->npcs < PP_MAX_STACK_DEPTH ? w->npcs : PP_MAX_STACK_DEPTH;

		memcpy(frames + nk, w->pcs, nu * sizeof(uint64_t));
		d.sample.nr_ustack = (uint16_t)nu;
		d.sample.flags &= (uint16_t) ~(PP_SF_USTACK_STOPPED | PP_SF_USTACK_TRUNC);
		d.sample.flags |= PP_SF_USTACK_TABLES;
		s->stats.copies_walked++;
		switch (w->why) {
		case PP_UNWIND_END:
		case PP_UNWIND_FP_END:
			s->stats.copies_whole++;
			break;
		case PP_UNWIND_DEPTH:
			d.sample.flags |= PP_SF_USTACK_TRUNC;
			s->stats.copies_whole++; /* whole to the depth asked for */
			break;
		case PP_UNWIND_UNREADABLE:
			d.sample.flags |= PP_SF_USTACK_STOPPED;
			s->stats.copies_short_copy_ended++;
			break;
		case PP_UNWIND_NO_CFI:
			d.sample.flags |= PP_SF_USTACK_STOPPED;
			s->stats.copies_short_no_cfi++;
			break;
		default:
			d.sample.flags |= PP_SF_USTACK_STOPPED;
			s->stats.copies_short_other++;
			break;
		}
	}
	d.sample.hdr.size =
	    (uint32_t)(sizeof(d.sample) + ((size_t)nk + d.sample.nr_ustack) * sizeof(uint64_t));
	d.stack_bytes = (const unsigned char *)frames;
	(void)handle_sample(s, &d);
}

void pp_session_take_walked(struct pp_session *s)
{
	if (s->opts.unwinder)
		pp_unwinder_take_walked(s->opts.unwinder, on_walked, s);
}

int pp_session_handle_decoded(struct pp_session *s, const struct pp_decoded *d)
{
	if (d->kind == PP_DECODED_TASK) {
		s->stats.task_events++;
		if (d->task.kind == PP_TASK_EXEC && d->task.tgid == s->launcher_tgid &&
		    !s->launcher_exec_ns)
			s->launcher_exec_ns = d->task.time_ns ? d->task.time_ns : 1;
		if (d->task.kind == PP_TASK_EXEC) {
			/*
			 * With the side-band, its exec record makes the new image, whose list
			 * replaces the old one: this record, read later, would remove it.
			 */
			if (!s->opts.sideband) {
				pp_unwinder_release(s->opts.unwinder, d->task.tgid);
				pp_proc_cache_on_exec_at(s->procs, d->task.tgid, d->task.time_ns);
			}
		} else {
			pp_unwinder_release(s->opts.unwinder, d->task.tgid);
			pp_proc_cache_on_exit(s->procs, d->task.tgid);
		}
		return 0;
	}
	sideband_catch_up(s, d->sample.time_ns);
	if (pp_symloader_ready(s->loader))
		apply_symbol_results(s);
	if (s->njit && d->sample.time_ns > s->jit_retry_ns + JIT_RETRY_NS)
		retry_jit_names(s);
	if (s->launcher_tgid && from_launcher(s, &d->sample)) {
		s->stats.launcher_records++;
		return 0; /* the launcher's, before its command's start */
	}
	if ((d->sample.flags & PP_SF_OFF_CPU) && d->sample.addr)
		return handle_woken_wait(s, d);
	if (d->raw_bytes) {
		int ret = -EOPNOTSUPP;

		if (s->opts.unwinder) {
			const struct pp_proc *proc =
			    pp_proc_cache_get_at(s->procs, d->sample.tgid, d->sample.time_ns);

			/* an image no longer kept: the process's list is another program's */
			ret = proc || errno != ESTALE ? walk_later(s, d, proc) : -ESTALE;
		}
		s->stats.ustack_copies++;
		if (ret == 0)
			return 0;
		s->stats.copies_refused++;
	}
	return handle_sample(s, d);
}

void pp_session_skip_launcher(struct pp_session *s, uint32_t tgid, uint64_t mono_ns)
{
	s->launcher_tgid = tgid;
	s->launcher_until_ns = mono_ns;
	s->launcher_exec_ns = 0;
	memset(s->launcher_comm, 0, sizeof(s->launcher_comm));
	if (prctl(PR_GET_NAME, s->launcher_comm) != 0)
		s->launcher_comm[0] = '\0';
}

/* Keeps a copy of a record taken after the hold boundary, for the next window. */
static int hold_record(struct pp_session *s, const void *data, size_t len)
{
	size_t need = s->held_len + sizeof(uint32_t) + len;

	if (need > HOLD_MAX_BYTES || len > UINT32_MAX)
		return -ENOSPC;
	if (need > s->held_cap) {
		size_t cap = s->held_cap ? s->held_cap : 64 * 1024;
		uint8_t *nb;

		while (cap < need)
			cap *= 2;
		nb = realloc(s->held, cap);
		if (!nb)
			return -ENOMEM;
		s->held = nb;
		s->held_cap = cap;
	}
	memcpy(s->held + s->held_len, &(uint32_t){(uint32_t)len}, sizeof(uint32_t));
	memcpy(s->held + s->held_len + sizeof(uint32_t), data, len);
	s->held_len = need;
	s->stats.samples_held++;
	return 0;
}

int pp_session_handle_record(struct pp_session *s, const void *data, size_t len)
{
	struct pp_decoded d;
	int ret = pp_record_decode(data, len, &d, &s->stats.decode);

	if (ret)
		return ret;
	if (s->holding && d.kind != PP_DECODED_TASK && d.sample.time_ns >= s->hold_boundary_ns &&
	    hold_record(s, data, len) == 0)
		return 0;
	return pp_session_handle_decoded(s, &d);
}

void pp_session_hold_from(struct pp_session *s, uint64_t boundary_mono_ns)
{
	s->holding = 1;
	s->hold_boundary_ns = boundary_mono_ns;
}

int pp_session_release_held(struct pp_session *s, uint64_t next_boundary_mono_ns)
{
	uint8_t *held = s->held;
	size_t held_len = s->held_len, off = 0;
	uint64_t holds = s->stats.samples_held;

	/* fed from a buffer of its own: the records of a later window are held again */
	s->held = NULL;
	s->held_len = s->held_cap = 0;
	s->holding = next_boundary_mono_ns != 0;
	s->hold_boundary_ns = next_boundary_mono_ns;
	while (off + sizeof(uint32_t) <= held_len) {
		uint32_t len;

		memcpy(&len, held + off, sizeof(len));
		off += sizeof(len);
		pp_session_handle_record(s, held + off, len);
		off += len;
	}
	s->stats.samples_held = holds; /* one held again was counted as it was first held */
	free(held);
	return 0;
}

int pp_session_record_cb(void *ctx, const void *data, size_t len)
{
	pp_session_handle_record(ctx, data, len);
	return 0;
}

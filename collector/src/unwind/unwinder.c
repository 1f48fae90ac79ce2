/*
 * The unwind table manager (see unwinder.h). Two locks: `lock` guards what the sample path
 * touches (the set of processes seen, the queue); `work` serializes the work itself (the
 * table cache, the row allocator, the per-process table lists), done by the worker thread or
 * by pp_unwinder_install's caller. Releases go through the queue too, so a process's release
 * and a later install of a reused pid happen in order.
 */
#define _GNU_SOURCE
#include "unwinder.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/deadline.h"
#include "base/log.h"
#include "base/elf_read.h"
#include "base/fsutil.h"
#include "base/hash.h"
#include "process/mapped_file.h"
#include "process/procmaps.h"
#include "symbolize/elf_symbols.h"
#include "extents.h"
#include "file_ids.h"
#include "table_cache.h"
#include "unwind_pack.h"
#include "cfi/fde_lookup.h"
#include "cfi/unwind_table.h"

/* The compiler's rules are the ABI's, value for value. */
_Static_assert(PP_CFA_NONE == PP_UW_CFA_NONE && PP_CFA_RSP == PP_UW_CFA_RSP &&
		   PP_CFA_RBP == PP_UW_CFA_RBP && PP_CFA_PLT == PP_UW_CFA_PLT &&
		   PP_CFA_DEREF_RSP == PP_UW_CFA_DEREF_RSP &&
		   PP_CFA_UNSUPPORTED == PP_UW_CFA_UNSUPPORTED &&
		   PP_CFA_DEFERRED == PP_UW_CFA_DEFERRED,
	       "CFA rules");
_Static_assert(PP_REG_SAME == PP_UW_REG_SAME && PP_REG_UNDEFINED == PP_UW_REG_UNDEFINED &&
		   PP_REG_AT_CFA == PP_UW_REG_AT_CFA && PP_REG_AT_RSP == PP_UW_REG_AT_RSP &&
		   PP_REG_UNSUPPORTED == PP_UW_REG_UNSUPPORTED &&
		   PP_UNWIND_SIGNAL_FRAME == PP_UW_SIGNAL_FRAME,
	       "register rules");

#define MAX_MAPS_BYTES (8u << 20) /* a /proc/PID/maps larger than this is cut */
#define QUEUE_SIZE 8192
/*
 * Releases wake the worker only this many at a time: a node that starts hundreds of programs a
 * second would wake it for every exit, two context switches each, where nothing waits on a
 * release (an install, the sweep and a drain take the ones queued).
 */
#define RELEASE_BATCH 32

enum op { OP_INSTALL, OP_RELEASE, OP_WALK };

/* A stack copy to walk (pp_unwinder_walk_later), then its walk: one allocation. */
struct later {
	struct later *next; /* the done list */
	uint32_t tgid, stack_len;
	struct pp_unwind_regs regs;
	uint64_t stack_base;
	size_t blob_len;
	int status;
	enum pp_unwind_stop why;
	struct pp_unwind_walk_stats st;
	size_t npcs;
	uint64_t pcs[PP_MAX_STACK_DEPTH];
	uint8_t data[]; /* the stack copy, then the blob */
};

struct table {
	/* "c:" the digest of what its table is compiled from, or "i:" dev, inode, size, mtime
	 * for a file whose CFI cannot be read */
	char key[80];
	/* another file in the slot has another: a name of a file (file_ids.h) holds for this one */
	uint32_t serial;
	/* the digest key spells (has_digest: a "c:" key), for the table cache */
	uint8_t digest[PP_UNWIND_DIGEST_SIZE];
	uint8_t has_digest;
	uint64_t hash;
	uint32_t first, nr;		/* the run in the row array; nr 0: none there now */
	struct pp_unwind_packed packed; /* nr_pages, base_vaddr, the rules held (words freed) */
	struct pp_unwind_load loads[PP_UNWIND_MAX_LOADS];
	uint32_t nloads;
	uint32_t users; /* mappings in live processes' lists */
	uint64_t last_use;
	uint8_t in_use;	 /* the slot holds a file */
	uint8_t none;	 /* the file has no usable CFI: remembered, not retried */
	uint8_t no_room; /* did not fit: tried again only once rows were freed since */
	uint64_t no_room_frees;
	uint8_t built_before; /* rows were built once: building again is a rebuild */
	/*
	 * A partial table: its file's FDEs found one at a time as walks of stack copies reach
	 * their code (fde_lookup.h), the rows found so far in its run and a deferred row
	 * (PP_UW_CFA_DEFERRED) over the rest; NULL for a table compiled whole.
	 */
	struct pp_fde_lookup *partial;
	struct pp_unwind_row *prows; /* sorted */
	size_t nprows, prows_cap;
	uint64_t *found; /* the address of each FDE found, kept for a restart (table cache) */
	size_t nfound, found_cap;
	size_t nfound_kept;	 /* ... of which kept so far */
	uint64_t partial_misses; /* frames of walks that reached code not found yet */
	uint32_t partial_short;	 /* ... walks of copies that then ended before the stack did */
	uint8_t dirty;		 /* rows found since its run was written */
	uint8_t whole_failed;	 /* compiling it whole failed: partial for good */
};

/* What the worker keeps per installed process: the tables its list names. */
struct proc {
	uint32_t tgid;
	uint32_t ntables;
	uint32_t *tables;
	uint64_t maps_hash; /* of the /proc/PID/maps text the list was made from */
	/* the list as installed, for walks of stack copies (nmaps entries, sorted) */
	struct pp_bpf_unwind_mapping *maps;
	uint32_t *map_tables; /* each mapping's table: its index + 1, 0 for none */
	uint32_t nmaps;
	uint32_t list_flags; /* PP_UW_PROC_* of the list as installed */
	uint32_t live_at;    /* its place in live_tgids */
	uint64_t list_at;    /* where the sink keeps its list (the sink's own note) */
};

/* The sample path's view: processes queued or installed, and when their maps were read. */
struct seen {
	uint32_t tgid; /* 0: empty slot */
	uint16_t installed;
	uint16_t scans; /* rescans so far */
	uint64_t scanned_ms;
	uint64_t version; /* side-band images: the image and mappings last queued (0: none) */
};

struct pp_unwinder {
	struct pp_unwinder_sink sink;
	char proc_root[256];
	uint32_t max_procs, max_tables, rescan_ms;
	/*
	 * Slots below this were ever taken: new files take the lowest free slot, so the tables
	 * lie there, and lookups and walks over them stop here, not at max_tables (a 4,096-slot
	 * scan was 3 MiB of memory per lookup, of which a node uses a few dozen slots).
	 */
	uint32_t tables_hwm;
	uint32_t table_serial; /* the last slot's serial given */
	/*
	 * The names files were found under (a stat of the opened file, the side-band's identity,
	 * a maps line), each the table of its file: found again without an open or a digest.
	 */
	struct pp_file_ids *file_ids;
	bool mmap_reports;   /* opts.mmap_reports */
	bool tables_only;    /* opts.tables_only */
	uint32_t max_frames; /* opts.max_frames, at most PP_MAX_STACK_DEPTH */
	bool kick_by_caller; /* opts.kick_by_caller */
	bool kick_wanted;    /* work queued since the last pp_unwinder_kick; under lock */
	uint32_t self;	     /* this process, left out */
	uint32_t note_tgid;  /* the caller's last pp_unwinder_note (one thread notes) */
	uint64_t note_ms;
	uint64_t note_version; /* ... and the version of its last pp_unwinder_note_proc */

	pthread_mutex_t lock; /* seen, queue, stats_q */
	pthread_cond_t cond, idle;
	struct seen *seen; /* open addressing, linear probing, 2 * max_procs slots */
	uint32_t seen_mask, nseen;
	struct queued {
		uint32_t tgid, op;
		/* OP_INSTALL from the side-band: the mappings (owned), and where to find the
		 * files when the process is gone; NULL maps: read /proc/PID/maps */
		struct pp_maps *maps;
		uint32_t relatives[PP_PROC_RELATIVES];
		/* OP_WALK (owned); with maps: those of the image the copy was taken in */
		struct later *walk;
	} queue[QUEUE_SIZE];
	uint32_t qhead, qlen;
	uint32_t releases_queued; /* since the worker was last woken (RELEASE_BATCH) */
	bool busy, stop, sweep_wanted;
	struct later *done_head, *done_tail; /* walks done, not taken */
	uint32_t walks;			     /* walks queued or done, not taken */
	uint32_t walks_queued;		     /* of those, not walked yet */
	uint64_t walks_done, walks_refused;
	uint64_t swept; /* processes released because /proc no longer had them */
	pthread_t thread;
	bool has_thread;

	pthread_mutex_t work; /* everything below */
	struct table *tables;
	uint64_t tick;
	struct pp_extents rows; /* the row array's free runs: a table that did not fit may since */
	struct proc *procs;	/* open addressing like seen */
	uint32_t procs_mask;
	/*
	 * The procs' tgids, dense: what visits every process (a partial table's holders moved)
	 * visits the few live ones, not the slots of a hash sized for the most there may be.
	 */
	uint32_t *live_tgids;
	uint32_t nlive;
	struct pp_bpf_unwind_list *scratch;
	struct pp_unwind_rules *rules; /* the rule array's contents */
	struct pp_table_cache *cache;  /* NULL: none */
	uint32_t *walk_words;	       /* a page's rows, read for a walk (1 << PP_UW_PAGE_SHIFT) */
	uint32_t partial_min_fdes;     /* opts.partial_min_fdes; UINT32_MAX: none partial */
	uint32_t scratch_tables[PP_UNWIND_MAX_MAPPINGS]; /* an install's, as proc.map_tables */
	struct pp_unwind_row *fde_rows; /* one FDE's rows, found for a walk (PP_FDE_MAX_ROWS) */
	bool partial_dirty;		/* a partial table has rows not written yet */
	uint64_t partial_written_ms;	/* when they were last written */
	uint64_t found_kept_ms;		/* ... and what they found last kept (table cache) */
	uint64_t found_keep_ms;		/* opts.found_keep_ms, PARTIAL_KEEP_MS by default */
	struct pp_unwinder_stats st;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	return x ^ (x >> 16);
}

/*
 * A hash of the executable mappings' lines of a maps text: what the list is made of. Other
 * lines (the heap, anonymous memory) change all the time and do not matter here.
 */
static uint64_t hash_exec_lines(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n;) {
		const char *nl = memchr(s + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - s) : n;
		const char *sp = memchr(s + i, ' ', end - i);

		if (sp && (size_t)(sp - s) + 3 < end && sp[3] == 'x')
			for (size_t j = i; j <= end && j < n; j++) /* the newline too */
				h = (h ^ (uint8_t)s[j]) * 1099511628211ull;
		i = end + 1;
	}
	return h;
}

/* --- the seen set (under lock) --- */

static struct seen *seen_find(struct pp_unwinder *u, uint32_t tgid)
{
	for (uint32_t i = hash32(tgid) & u->seen_mask;; i = (i + 1) & u->seen_mask) {
		if (u->seen[i].tgid == tgid)
			return &u->seen[i];
		if (!u->seen[i].tgid)
			return NULL;
	}
}

static struct seen *seen_add(struct pp_unwinder *u, uint32_t tgid)
{
	uint32_t i;

	if (u->nseen >= u->max_procs)
		return NULL;
	for (i = hash32(tgid) & u->seen_mask; u->seen[i].tgid; i = (i + 1) & u->seen_mask)
		;
	u->seen[i] = (struct seen){.tgid = tgid};
	u->nseen++;
	return &u->seen[i];
}

/* Linear probing's deletion: shift later entries of the run back into the hole. */
static void seen_del(struct pp_unwinder *u, struct seen *e)
{
	uint32_t hole = (uint32_t)(e - u->seen), i = hole;

	u->seen[hole].tgid = 0;
	u->nseen--;
	for (;;) {
		uint32_t home;

		i = (i + 1) & u->seen_mask;
		if (!u->seen[i].tgid)
			return;
		home = hash32(u->seen[i].tgid) & u->seen_mask;
		/* the entry may fill the hole unless its home lies in (hole, i] */
		if (((i - home) & u->seen_mask) >= ((i - hole) & u->seen_mask)) {
			u->seen[hole] = u->seen[i];
			u->seen[i].tgid = 0;
			hole = i;
		}
	}
}

/* A queued op's mappings (exec_mappings' copy) let go; NULL is fine. */
static void drop_maps(struct pp_maps *maps)
{
	if (maps) {
		pp_maps_fini(maps);
		free(maps);
	}
}

static bool enqueue_maps(struct pp_unwinder *u, uint32_t tgid, enum op op, struct pp_maps *maps,
			 const uint32_t *relatives)
{
	struct queued *q;

	if (u->qlen == QUEUE_SIZE)
		return false;
	q = &u->queue[(u->qhead + u->qlen) % QUEUE_SIZE];
	q->tgid = tgid;
	q->op = op;
	q->maps = maps;
	q->walk = NULL;
	memset(q->relatives, 0, sizeof(q->relatives));
	if (relatives)
		memcpy(q->relatives, relatives, sizeof(q->relatives));
	u->qlen++;
	if (op != OP_RELEASE || ++u->releases_queued >= RELEASE_BATCH) {
		u->releases_queued = 0;
		if (u->kick_by_caller)
			u->kick_wanted = true; /* pp_unwinder_kick, once for the caller's batch */
		else
			pthread_cond_signal(&u->cond);
	}
	return true;
}

static bool enqueue(struct pp_unwinder *u, uint32_t tgid, enum op op)
{
	return enqueue_maps(u, tgid, op, NULL, NULL);
}

/* --- the worker's process lists (under work) --- */

static struct proc *proc_find(struct pp_unwinder *u, uint32_t tgid, bool add)
{
	uint32_t i;

	for (i = hash32(tgid) & u->procs_mask; u->procs[i].tgid; i = (i + 1) & u->procs_mask)
		if (u->procs[i].tgid == tgid)
			return &u->procs[i];
	if (!add)
		return NULL;
	u->procs[i] = (struct proc){.tgid = tgid, .live_at = u->nlive};
	u->live_tgids[u->nlive++] = tgid;
	return &u->procs[i];
}

static void proc_del(struct pp_unwinder *u, struct proc *p)
{
	uint32_t hole = (uint32_t)(p - u->procs), i = hole, last = u->live_tgids[--u->nlive];

	if (last != p->tgid) { /* the last one takes its place in the dense list */
		u->live_tgids[p->live_at] = last;
		proc_find(u, last, false)->live_at = p->live_at;
	}
	free(p->tables);
	free(p->maps);
	free(p->map_tables);
	u->procs[hole] = (struct proc){0};
	for (;;) {
		uint32_t home;

		i = (i + 1) & u->procs_mask;
		if (!u->procs[i].tgid)
			return;
		home = hash32(u->procs[i].tgid) & u->procs_mask;
		if (((i - home) & u->procs_mask) >= ((i - hole) & u->procs_mask)) {
			u->procs[hole] = u->procs[i];
			u->procs[i] = (struct proc){0};
			hole = i;
		}
	}
}

/* --- the row array's free runs (under work) --- */

static int rows_alloc(struct pp_unwinder *u, uint32_t n, uint32_t *first)
{
	int ret = pp_extents_alloc(&u->rows, n, first);

	u->st.rows_used = u->rows.used;
	return ret;
}

static void rows_free(struct pp_unwinder *u, uint32_t first, uint32_t n)
{
	pp_extents_free(&u->rows, first, n);
	u->st.rows_used = u->rows.used;
}

/* The least recently installed table with rows that no live process uses, or NULL. */
static struct table *lru_unused(struct pp_unwinder *u, bool with_rows)
{
	struct table *best = NULL;

	for (uint32_t i = 0; i < u->tables_hwm; i++) {
		struct table *t = &u->tables[i];

		if (!t->in_use || t->users || (with_rows && !t->nr))
			continue;
		if (!best || t->last_use < best->last_use)
			best = t;
	}
	return best;
}

static void partial_forget(struct table *t)
{
	pp_fde_lookup_free(t->partial);
	t->partial = NULL;
	free(t->prows);
	t->prows = NULL;
	t->nprows = t->prows_cap = 0;
	free(t->found);
	t->found = NULL;
	t->nfound = t->found_cap = t->nfound_kept = 0;
}

static void table_drop_rows(struct pp_unwinder *u, struct table *t)
{
	if (t->nr) {
		rows_free(u, t->first, t->nr);
		t->nr = 0;
	}
	pp_unwind_packed_release(&t->packed, u->rules);
	if (t->partial) {
		/* its rows are what walks found: the next sight of its file starts it again */
		partial_forget(t);
		memset(t, 0, sizeof(*t));
	}
}

/* Drop the rows (and rules) of the least recently installed unused table: false if none. */
static bool evict_one(struct pp_unwinder *u, const char *what)
{
	struct table *victim = lru_unused(u, true);

	if (!victim)
		return false;
	pp_debug("unwind: evicting the table of %s to make room for %s", victim->key, what);
	table_drop_rows(u, victim);
	u->st.tables_evicted++;
	return true;
}

/* Room for n rows, evicting unused tables from the least recently installed on. */
static int make_room(struct pp_unwinder *u, uint32_t n, uint32_t *first)
{
	while (rows_alloc(u, n, first) != 0)
		if (!evict_one(u, "rows"))
			return -ENOSPC;
	return 0;
}

static struct table *table_find(struct pp_unwinder *u, const char *key, uint64_t h)
{
	for (uint32_t i = 0; i < u->tables_hwm; i++)
		if (u->tables[i].in_use && u->tables[i].hash == h && !strcmp(u->tables[i].key, key))
			return &u->tables[i];
	return NULL;
}

/* A slot for a new file: a free one, else the least recently installed unused one. */
static struct table *table_slot(struct pp_unwinder *u)
{
	struct table *t = NULL;

	for (uint32_t i = 0; i < u->max_tables && !t; i++)
		if (!u->tables[i].in_use) {
			t = &u->tables[i];
			if (i >= u->tables_hwm)
				u->tables_hwm = i + 1;
		}
	if (!t) {
		t = lru_unused(u, false);
		if (!t)
			return NULL;
		if (t->nr)
			u->st.tables_evicted++;
		table_drop_rows(u, t);
	}
	memset(t, 0, sizeof(*t));
	t->serial = ++u->table_serial;
	return t;
}

/* The table a name stands for: confirmed by an open within max_age_ms (0: however long ago). */
static struct table *table_named(struct pp_unwinder *u, const char *name, uint64_t max_age_ms)
{
	struct pp_file_id id;
	struct table *t;

	if (!name[0] || !pp_file_ids_find(u->file_ids, name, &id) || id.table >= u->tables_hwm)
		return NULL;
	t = &u->tables[id.table];
	if (!t->in_use || t->serial != id.serial ||
	    (max_age_ms && now_ms() - id.confirmed_ms > max_age_ms))
		return NULL;
	return t;
}

/* The key of a table by its digest (file_key's, and an identity's from an earlier start). */
static void digest_key(const uint8_t digest[PP_UNWIND_DIGEST_SIZE], char *key, size_t size)
{
	char hex[PP_UNWIND_DIGEST_HEX_SIZE];

	pp_unwind_digest_hex(digest, hex);
	snprintf(key, size, "c:%s", hex);
}

/*
 * The file's key: the digest of its CFI, segments and the compiler (cfi/unwind_table.h), so
 * two files share a table only where they compile to the same one: a file that claims
 * another's build id (a container's, hostile) gets its own. A file the digest refuses (not
 * ELF, CFI over the caps): where it is and when it changed. *digested: digest holds it.
 * *cs: the CFI as the digest read it, for a compile that needs the file's table (NULL where
 * fd is no ELF file).
 */
static void file_key(int fd, const struct stat *st, char *key, size_t size,
		     uint8_t digest[PP_UNWIND_DIGEST_SIZE], bool *digested,
		     struct pp_cfi_source **cs)
{
	*cs = pp_cfi_source_open_fd(fd);
	*digested = *cs && pp_cfi_source_digest(*cs, digest) == 0;
	if (*digested) {
		digest_key(digest, key, size);
	} else {
		snprintf(key, size, "i:%" PRIx64 ":%" PRIu64 ":%" PRId64 ":%" PRId64,
			 (uint64_t)st->st_dev, (uint64_t)st->st_ino, (int64_t)st->st_size,
			 (int64_t)st->st_mtim.tv_sec);
	}
}

/*
 * Pack the table, evicting unused tables while the rule array is full: 0, -ENOSPC (no room
 * for its rules even then) or pp_unwind_pack's other errors.
 */
static int pack_with_room(struct pp_unwinder *u, const struct pp_unwind_table *ut,
			  struct pp_unwind_packed *out)
{
	uint32_t max =
	    u->sink.nr_rows < PP_UW_MAX_TABLE_WORDS ? u->sink.nr_rows : PP_UW_MAX_TABLE_WORDS;
	int ret;

	while ((ret = pp_unwind_pack(ut, u->rules, max, out)) == -ENOSPC)
		if (!evict_one(u, "rules"))
			break;
	return ret;
}

/*
 * The file's table: read from the cache when one was kept under its digest (*from_cache),
 * else compiled (from cs, its CFI as its digest read it, where given), and kept there for the
 * next start. digest NULL: the file has none (the cache is not asked). NULL with errno as
 * pp_unwind_table_open_fd's.
 */
static struct pp_unwind_table *table_compile(struct pp_unwinder *u, int fd,
					     const struct pp_cfi_source *cs, const uint8_t *digest,
					     bool *from_cache)
{
	struct pp_unwind_table *ut;
	uint64_t t0;

	if (u->cache && digest) {
		t0 = pp_clock_ns(CLOCK_MONOTONIC);
		ut = pp_table_cache_get(u->cache, digest);
		u->st.cache_read_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
		if (ut) {
			*from_cache = true;
			u->st.tables_from_cache++;
			return ut;
		}
	}
	ut = cs ? pp_cfi_source_compile(cs, 0) : pp_unwind_table_open_fd(fd, 0);
	if (ut && u->cache && digest)
		(void)pp_table_cache_put(u->cache, digest, ut); /* counted by the cache */
	return ut;
}

/*
 * A packed table's run written to the shim: the rules it adds, room for its words (unused
 * tables evicted for it), the words, at *first. Then its words are let go and its rules stay
 * held; on failure all it held is let go. 0, -ENOSPC with *no_room (no room for the rows even
 * after evicting), or the sink's -errno.
 */
static int run_write(struct pp_unwinder *u, struct pp_unwind_packed *pk, uint32_t *first,
		     bool *no_room)
{
	int ret = 0;

	*no_room = false;
	for (uint32_t i = 0; i < pk->nnew && !ret; i++)
		ret = u->sink.write_rule(u->sink.ctx, pk->new_rules[i],
					 pp_unwind_rules_at(u->rules, pk->new_rules[i]));
	if (!ret) {
		ret = make_room(u, pk->nwords, first);
		*no_room = ret != 0;
	}
	if (!ret) {
		ret = u->sink.write_rows(u->sink.ctx, *first, pk->words, pk->nwords);
		if (ret)
			rows_free(u, *first, pk->nwords);
	}
	if (ret) {
		pp_unwind_packed_release(pk, u->rules);
		return ret;
	}
	/* the rows are in the kernel now; the rules held stay with the table */
	free(pk->words);
	pk->words = NULL;
	free(pk->new_rules);
	pk->new_rules = NULL;
	pk->nnew = 0;
	return 0;
}

/* Compile the file's CFI into a run of rows: 0 (t->nr may be 0: no CFI) or -ENOSPC. */
#define TRIM_AFTER_WORDS (256u << 10) /* 1 MiB of rows: a few MiB while compiling */

static int table_build(struct pp_unwinder *u, struct table *t, int fd,
		       const struct pp_cfi_source *cs, const char *name, const uint8_t *digest)
{
	struct pp_unwind_packed *pk = &t->packed;
	struct pp_unwind_table *ut;
	uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	bool from_cache = false, no_room = false;
	uint32_t nwords;
	int ret = 0;

	ut = table_compile(u, fd, cs, digest, &from_cache);
	if (!from_cache)
		u->st.build_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
	if (!ut) {
		int err = errno;

		t->none = 1;
		u->st.tables_none++;
		/* headers claiming too much (a hostile or corrupt file): said once per file */
		if (err == EFBIG || err == ENXIO) {
			u->st.tables_refused++;
			pp_warn("unwind: refused the CFI of %s (%s): %s", name, t->key,
				pp_elf_refusal_name(-err));
		} else {
			pp_debug("unwind: no table for %s: %s", t->key, strerror(err));
		}
		return 0;
	}
	u->st.tables_built += !from_cache;
	t->nloads = (uint32_t)pp_unwind_table_get_loads(ut, t->loads);
	t0 = pp_clock_ns(CLOCK_MONOTONIC);
	ret = pack_with_room(u, ut, pk);
	u->st.build_ns += pp_clock_ns(CLOCK_MONOTONIC) - t0;
	if (ret == -ENODATA || ret == -E2BIG) {
		/* no rows; or more than a table may have, or code spanning 4 GiB */
		t->none = 1;
		u->st.tables_too_big += ret == -E2BIG;
		if (ret == -E2BIG)
			pp_warn(
			    "unwind: the table of %s (%s) is over %u rows: frame pointers there",
			    name, t->key, PP_UW_MAX_TABLE_WORDS);
		ret = 0;
		goto out;
	}
	if (ret == -ENOSPC) {
		t->no_room = 1;
		t->no_room_frees = u->rows.frees;
		u->st.tables_no_room++;
		pp_debug("unwind: no room for the rules of %s", t->key);
		goto out;
	}
	if (ret)
		goto out;
	nwords = pk->nwords; /* a failed write lets pk go */
	ret = run_write(u, pk, &t->first, &no_room);
	if (!ret || no_room) {
		t->no_room = no_room;
		t->no_room_frees = u->rows.frees;
	}
	if (no_room) {
		u->st.tables_no_room++;
		pp_debug("unwind: no room for the %u rows of %s", nwords, t->key);
	}
	if (!ret)
		t->nr = nwords;
out:
	pp_unwind_table_free(ut);
	/*
	 * A large file's table is tens of MiB while it is compiled, in this thread's malloc
	 * arena, which keeps what is freed: handed back, the agent's memory is its caches'.
	 */
	if (t->nr > TRIM_AFTER_WORDS)
		malloc_trim(0);
	return ret;
}

/* --- partial tables (under work) --- */

#define PARTIAL_MIN_FDES 20000 /* opts.partial_min_fdes by default: ~20 ms to compile whole */
/*
 * A copied sample walked here costs about what compiling 16 FDEs does (its 8-28 KiB through
 * the ring, the walk): a partial table whose walks reached code not found yet that often, per
 * FDE of its file over PARTIAL_PAY, is compiled whole, and its samples walk in the kernel.
 */
#define PARTIAL_PAY 16
/*
 * Whole stacks first: a partial table whose stack copies came out short this often (stacks
 * deeper than a copy's 8-28 KiB) is compiled whole, its samples walked in the kernel.
 */
#define PARTIAL_SHORT_MAX 32
/*
 * Rows found are written at most this often, all tables' at once, and this long after the
 * first found since the last write: each write makes a table's run again (thousands of FDEs'
 * rows for a few new ones) and moves its holders, and under churn walks find an FDE every few
 * ms. Samples meeting code found but not written meanwhile take copies, walked as before
 * (their stacks whole, their cost the ring's): under the churn loop no more of them every 5 s
 * than every 500 ms, where the writes were a tenth of the steady state's CPU.
 */
#define PARTIAL_WRITE_MS 5000
#define PARTIAL_KEEP_MS 300000

/*
 * The processes holding t (by their mapping's table) given its run at its new place: holders
 * is how many mappings hold it, the search over the processes ending once they are all moved
 * (under churn most runs are rewritten while one process, or none, holds them).
 */
static void move_holders(struct pp_unwinder *u, const struct table *t, uint64_t old_base,
			 uint32_t holders)
{
	uint32_t ti = (uint32_t)(t - u->tables) + 1;

	for (uint32_t i = 0; holders && i < u->nlive; i++) {
		struct proc *p = proc_find(u, u->live_tgids[i], false);
		struct pp_bpf_unwind_list *out = u->scratch;
		bool moved = false;

		if (!p->map_tables)
			continue;
		for (uint32_t k = 0; k < p->nmaps; k++) {
			if (p->map_tables[k] != ti)
				continue;
			p->maps[k].base = p->maps[k].base - old_base + t->packed.base_vaddr;
			p->maps[k].first_word = t->first;
			p->maps[k].nr_pages = t->packed.nr_pages;
			moved = true;
			holders -= holders > 0;
		}
		if (!moved)
			continue;
		memset(out, 0, sizeof(*out));
		out->nr = p->nmaps;
		out->flags = p->list_flags;
		memcpy(out->m, p->maps, p->nmaps * sizeof(*p->maps));
		if (u->sink.set_proc(u->sink.ctx, p->tgid, out, &p->list_at)) {
			/*
			 * The kernel's list still names the old run, whose rows are let go next
			 * and reused: the process goes without one (its samples carry stack
			 * copies, walked here with the moved list) rather than walk another
			 * table's rows.
			 */
			u->sink.del_proc(u->sink.ctx, p->tgid, p->list_at);
			p->list_at = 0;
			u->st.partial_move_failed++;
		}
	}
}

/*
 * Put t's new run in the place of its old one: the processes holding it moved there, then the
 * old run's rows and rules let go. The caller holds t (users counts it once more).
 */
static void table_replace_run(struct pp_unwinder *u, struct table *t,
			      const struct pp_unwind_packed *pk, uint32_t first)
{
	struct pp_unwind_packed old = t->packed;
	uint32_t old_first = t->first, old_nr = t->nr;

	t->packed = *pk;
	t->first = first;
	t->nr = pk->nwords;
	move_holders(u, t, old.base_vaddr, t->users - 1);
	if (old_nr)
		rows_free(u, old_first, old_nr);
	pp_unwind_packed_release(&old, u->rules);
}

/* A partial table's rows found so far written as its run: 0 or -errno. */
static int partial_write(struct pp_unwinder *u, struct table *t)
{
	struct pp_unwind_table *ut = pp_unwind_table_from_rows(t->prows, t->nprows);
	struct pp_unwind_packed pk = {0};
	uint32_t first = 0;
	bool no_room;
	int ret;

	if (!ut)
		return -errno;
	t->users++; /* not evicted while its new run is made */
	ret = pack_with_room(u, ut, &pk);
	pp_unwind_table_free(ut);
	if (!ret)
		ret = run_write(u, &pk, &first, &no_room);
	t->dirty = 0;
	if (ret) {
		t->users--;
		u->st.partial_write_failed++;
		return ret;
	}
	table_replace_run(u, t, &pk, first);
	t->users--;
	u->st.partial_writes++;
	return 0;
}

/* One FDE's rows n over [start, limit) in place of the deferred row there: 0 or -ENOMEM. */
/* Room for n more rows in t's found rows (grown by half again): false without memory. */
static bool prows_room(struct table *t, size_t n)
{
	size_t cap = t->prows_cap;
	struct pp_unwind_row *nv;

	if (t->nprows + n <= cap)
		return true;
	cap = cap + cap / 2 > t->nprows + n ? cap + cap / 2 : t->nprows + n + 64;
	nv = realloc(t->prows, cap * sizeof(*nv));
	if (!nv)
		return false;
	t->prows = nv;
	t->prows_cap = cap;
	return true;
}

/*
 * An FDE's rows over [start, limit) put in place among t's found rows, in the array as it
 * is: what held at limit before holds there after. Its tail moves, nothing is copied anew (a
 * fresh array per FDE was a third of the worker's time under churn).
 */
static int partial_add(struct table *t, const struct pp_unwind_row *rows, size_t n, uint64_t start,
		       uint64_t limit)
{
	size_t i = 0, j, keep;
	struct pp_unwind_row cover;
	bool restore;

	while (i < t->nprows && t->prows[i].pc < start)
		i++;
	j = i;
	while (j < t->nprows && t->prows[j].pc < limit)
		j++;
	if (j > i && t->prows[i].pc == start && t->prows[i].cfa_rule != PP_CFA_DEFERRED)
		return 0; /* found before */
	/* what held at limit before holds there after */
	restore = j > 0 && limit != UINT64_MAX && (j == t->nprows || t->prows[j].pc > limit);
	cover = j > 0 ? t->prows[j - 1] : (struct pp_unwind_row){0};
	keep = i + n + restore;
	if (keep > j && !prows_room(t, keep - j))
		return -ENOMEM;
	memmove(t->prows + keep, t->prows + j, (t->nprows - j) * sizeof(*t->prows));
	memcpy(t->prows + i, rows, n * sizeof(*rows));
	if (restore) {
		cover.pc = limit;
		t->prows[i + n] = cover;
	}
	t->nprows = keep + (t->nprows - j);
	t->dirty = 1;
	return 0;
}

/* The buffer one FDE's rows are found into, made at the first lookup: false without memory. */
static bool fde_rows_ready(struct pp_unwinder *u)
{
	if (!u->fde_rows)
		u->fde_rows = malloc(PP_FDE_MAX_ROWS * sizeof(*u->fde_rows));
	return u->fde_rows != NULL;
}

/* start, where an FDE was found, kept for the next start (memory short: not kept). */
static void note_found(struct table *t, uint64_t start)
{
	if (t->nfound == t->found_cap) {
		size_t cap = t->found_cap ? 2 * t->found_cap : 64;
		uint64_t *nv =
		    cap <= PP_TABLE_FOUND_MAX ? realloc(t->found, cap * sizeof(*nv)) : NULL;

		if (!nv)
			return;
		t->found = nv;
		t->found_cap = cap;
	}
	t->found[t->nfound++] = start;
}

/* The row at vaddr among those found so far: NULL where none covers it. */
static const struct pp_unwind_row *partial_row(const struct table *t, uint64_t vaddr)
{
	size_t lo = 0, hi = t->nprows;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->prows[mid].pc <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->prows[lo - 1] : NULL;
}

/*
 * The FDE covering vaddr, looked up in t's file and its rows added (its start noted for the
 * next start): 1, 0 where none covers vaddr, or -errno.
 */
static int partial_lookup(struct pp_unwinder *u, struct table *t, uint64_t vaddr)
{
	uint64_t start, limit;
	size_t n;
	int ret;

	if (!fde_rows_ready(u))
		return -ENOMEM;
	ret = pp_fde_lookup_rows(t->partial, vaddr, u->fde_rows, &n, &start, &limit);
	if (ret <= 0)
		return ret;
	ret = partial_add(t, u->fde_rows, n, start, limit);
	if (ret)
		return ret;
	note_found(t, start);
	return 1;
}

/* The row at vaddr of t's file, its FDE found and added where not yet: 1, 0 (no CFI), -errno. */
static int partial_find(struct pp_unwinder *u, struct table *t, uint64_t vaddr,
			struct pp_unwind_row *out)
{
	const struct pp_unwind_row *r = partial_row(t, vaddr);
	int ret;

	if (r && r->cfa_rule != PP_CFA_DEFERRED) { /* found for a walk before it was written */
		*out = *r;
		return r->cfa_rule != PP_CFA_NONE;
	}
	ret = partial_lookup(u, t, vaddr);
	if (ret <= 0)
		return ret;
	u->st.partial_fdes++;
	r = partial_row(t, vaddr);
	if (!r)
		return 0;
	*out = *r;
	return r->cfa_rule != PP_CFA_NONE && r->cfa_rule != PP_CFA_DEFERRED;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * The FDEs covering hints (ascending, as an earlier start found them) looked up and their
 * rows added in one pass over t's rows, each as partial_add would add it: thousands of
 * FDEs added one at a time moved the rows after each one, seconds of a start. 0 or -errno.
 */
static int partial_add_found(struct pp_unwinder *u, struct table *t, const uint64_t *hints,
			     size_t nhints)
{
	struct pp_unwind_row *old = t->prows, *out, last = {0};
	size_t nold = t->nprows, k = 0, nout = 0, cap = nold + 64;
	uint64_t done_until = 0;
	bool have_last = false;

	out = malloc(cap * sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (size_t h = 0; h < nhints; h++) {
		const struct pp_unwind_row *r;
		uint64_t start, limit;
		struct pp_unwind_row cover;
		bool had_cover;
		size_t n;

		if (hints[h] < done_until) /* in an FDE this pass added */
			continue;
		r = partial_row(t, hints[h]); /* t's rows are still the old ones */
		if ((r && r->cfa_rule != PP_CFA_DEFERRED) ||
		    pp_fde_lookup_rows(t->partial, hints[h], u->fde_rows, &n, &start, &limit) !=
			1 ||
		    start < done_until)
			continue;
		for (; k < nold && old[k].pc < start; k++)
			out[nout++] = last = old[k], have_last = true;
		/* found before: a row of its own already starts it */
		if ((nout && out[nout - 1].pc == start &&
		     out[nout - 1].cfa_rule != PP_CFA_DEFERRED && start < limit) ||
		    (k < nold && old[k].pc == start && old[k].pc < limit &&
		     old[k].cfa_rule != PP_CFA_DEFERRED))
			continue;
		for (; k < nold && old[k].pc < limit; k++)
			last = old[k], have_last = true;
		cover = last;
		had_cover = have_last;
		/* the rows so far, this FDE's, a restored row, and the old rows yet to come */
		if (nout + n + 1 + (nold - k) > cap) {
			size_t ncap = 2 * cap + n + 1;
			struct pp_unwind_row *nv = realloc(out, ncap * sizeof(*nv));

			if (!nv)
				break; /* what was added so far is kept: the rest found by walks */
			out = nv;
			cap = ncap;
		}
		memcpy(out + nout, u->fde_rows, n * sizeof(*out));
		nout += n;
		if (had_cover && limit != UINT64_MAX && (k == nold || old[k].pc > limit)) {
			cover.pc = limit;
			out[nout++] = cover;
		}
		if (nout) {
			last = out[nout - 1];
			have_last = true;
		}
		done_until = limit;
		note_found(t, start);
		u->st.partial_fdes_again++;
	}
	/* room for them always: nout + nold - k never passes cap */
	memcpy(out + nout, old + k, (nold - k) * sizeof(*out));
	nout += nold - k;
	free(old);
	t->prows = out;
	t->nprows = nout;
	t->prows_cap = cap;
	t->dirty = 1;
	return 0;
}

/*
 * A new partial table's first rows: a deferred row from its first FDE on, and its last FDE's
 * rows, so that its run's pages reach the end of its code. 0 or -errno.
 */
static int partial_start(struct pp_unwinder *u, struct table *t, const struct stat *st)
{
	uint64_t start, limit, *hints;
	size_t n, nhints;
	int ret;

	if (!fde_rows_ready(u))
		return -ENOMEM;
	if (pp_fde_lookup_rows(t->partial, 0, u->fde_rows, &n, &start, &limit) != 0 ||
	    limit == UINT64_MAX)
		return -ENODATA; /* no FDEs */
	if (!prows_room(t, 1))
		return -ENOMEM;
	t->prows[0] = (struct pp_unwind_row){.pc = limit, .cfa_rule = PP_CFA_DEFERRED};
	t->nprows = 1;
	ret = pp_fde_lookup_rows(t->partial, UINT64_MAX - 1, u->fde_rows, &n, &start, &limit);
	if (ret == 1)
		ret = partial_add(t, u->fde_rows, n, start, limit);
	/*
	 * The FDEs an earlier start's walks found in this very file: looked up again now (each
	 * one checked as any), so that its samples walk in the kernel from the first.
	 */
	if (ret >= 0 && pp_table_cache_get_found(u->cache, st, &hints, &nhints) == 0) {
		qsort(hints, nhints, sizeof(*hints), cmp_u64);
		/* without memory for them now, walks find them again as they reach their code */
		(void)partial_add_found(u, t, hints, nhints);
		free(hints);
	}
	return ret < 0 ? ret : partial_write(u, t);
}

/* What t's walks found, kept for the agent's next start (the file unchanged). */
static void partial_keep_found(struct pp_unwinder *u, struct table *t)
{
	struct stat st;
	int fd = pp_fde_lookup_fd(t->partial);

	if (!u->cache || t->nfound == t->nfound_kept || fd < 0 || fstat(fd, &st))
		return;
	if (pp_table_cache_put_found(u->cache, &st, t->found, t->nfound) == 0) {
		u->st.partial_found_kept++;
		t->nfound_kept = t->nfound;
	}
}

/*
 * A file with at least partial_min_fdes FDEs, not compiled at an earlier start: a partial
 * table, its FDEs found as walks reach them. NULL where the file gets a whole one.
 */
static struct table *partial_new(struct pp_unwinder *u, int fd, const struct stat *st,
				 const char *stat_key)
{
	struct pp_fde_lookup *l;
	struct table *t;

	/* an FDE takes 24 bytes and more (its entry, its search table's): skip what cannot */
	if (u->partial_min_fdes == UINT32_MAX || st->st_size < (off_t)u->partial_min_fdes * 24)
		return NULL;
	l = pp_fde_lookup_open_fd(fd);
	if (!l || pp_fde_lookup_count(l) < u->partial_min_fdes) {
		pp_fde_lookup_free(l);
		return NULL;
	}
	t = table_slot(u);
	if (!t) {
		pp_fde_lookup_free(l);
		return NULL;
	}
	snprintf(t->key, sizeof(t->key), "p:%016" PRIx64, pp_hash_str(stat_key));
	t->hash = pp_hash_str(t->key);
	t->in_use = 1;
	t->partial = l;
	t->nloads = (uint32_t)pp_fde_lookup_get_loads(l, t->loads);
	if (partial_start(u, t, st) != 0) {
		partial_forget(t);
		memset(t, 0, sizeof(*t));
		return NULL;
	}
	u->st.tables_partial++;
	return t;
}

/*
 * A partial table whose walks paid for its whole compile: compiled (or read from the table
 * cache), the processes holding it moved to the whole run. Where that fails it stays partial.
 */
static void partial_promote(struct pp_unwinder *u, struct table *t)
{
	struct table whole = {0};
	struct pp_cfi_source *cs = NULL;
	uint8_t digest[PP_UNWIND_DIGEST_SIZE];
	int fd = pp_fde_lookup_fd(t->partial);
	char key[80];
	bool digested;
	struct stat st;

	if (fd < 0 || fstat(fd, &st)) {
		t->whole_failed = 1;
		return;
	}
	file_key(fd, &st, key, sizeof(key), digest, &digested, &cs);
	if (digested && u->cache)
		pp_table_cache_note_digest(u->cache, &st, digest);
	t->users++; /* not evicted while its whole table is made */
	(void)table_build(u, &whole, fd, cs, key, digested ? digest : NULL);
	pp_cfi_source_free(cs);
	if (!whole.nr) {
		t->users--;
		t->whole_failed = 1;
		pp_debug("unwind: %s stays partial: its whole table did not fit or compile",
			 t->key);
		return;
	}
	t->nloads = whole.nloads;
	memcpy(t->loads, whole.loads, sizeof(t->loads));
	table_replace_run(u, t, &whole.packed, whole.first);
	t->users--;
	partial_forget(t);
	snprintf(t->key, sizeof(t->key), "%s", key);
	t->hash = pp_hash_str(key);
	t->has_digest = digested;
	if (digested)
		memcpy(t->digest, digest, sizeof(t->digest));
	t->built_before = 1;
	u->st.partial_promoted++;
}

/*
 * Rows found written, and partial tables whose walks paid for it compiled whole; every
 * found_keep_ms what they found kept for a restart too (an agent killed keeps what it had
 * found until then, not only one that ends).
 */
static void partial_flush(struct pp_unwinder *u)
{
	bool keep = u->cache && now_ms() - u->found_kept_ms >= u->found_keep_ms;

	for (uint32_t i = 0; i < u->tables_hwm; i++) {
		struct table *t = &u->tables[i];

		if (!t->in_use || !t->partial)
			continue;
		if (!t->whole_failed &&
		    (t->partial_misses * PARTIAL_PAY >= pp_fde_lookup_count(t->partial) ||
		     t->partial_short >= PARTIAL_SHORT_MAX))
			partial_promote(u, t);
		if (t->partial && t->dirty)
			(void)partial_write(u, t); /* counted; the rows stay found for walks */
		if (t->partial && keep)
			partial_keep_found(u, t);
	}
	u->partial_dirty = false;
	u->partial_written_ms = now_ms();
	if (keep)
		u->found_kept_ms = u->partial_written_ms;
}

/*
 * Open the file behind an executable mapping: the very file, checked (mapped_file.h); when
 * the process is gone, through the roots of the processes it came from.
 */
static int open_mapped(struct pp_unwinder *u, uint32_t tgid, const uint32_t *relatives,
		       const struct pp_map_entry *e)
{
	uint32_t root_pid;
	int fd = pp_mapped_file_open_gone(u->proc_root, tgid, relatives,
					  relatives ? PP_PROC_RELATIVES : 0, e, NULL, &root_pid);

	if (fd == -ESTALE)
		u->st.not_the_mapped_file++;
	return fd;
}

#define IDENTITY_TTL_MS 30000

/*
 * t holds the file of stat_key, as an open just confirmed; id_key: the mapping's name of it.
 * The file's stat names it with no time limit: the same device, inode, ctime and size again
 * are the same bytes (no write leaves ctime), so its digest is not redone.
 */
static void table_found_as(struct pp_unwinder *u, struct table *t, const char *stat_key,
			   const char *id_key)
{
	struct pp_file_id id = {
	    .table = (uint32_t)(t - u->tables), .serial = t->serial, .confirmed_ms = now_ms()};

	pp_file_ids_note(u->file_ids, stat_key, &id);
	pp_file_ids_note(u->file_ids, id_key, &id);
}

/* How a mapping names its file without an open (pp_mapped_file_identity), "" for none. */
static void mapping_name(const struct pp_map_entry *e, char *out, size_t size)
{
	struct pp_file_identity id;

	out[0] = '\0';
	if (pp_mapped_file_identity(e, &id))
		snprintf(out, size, "d:%x:%x:%" PRIu64 ":%" PRIu64, id.dev_major, id.dev_minor,
			 id.inode, id.ino_generation);
}

/* The table for a mapping, built if new: NULL when the mapping gets none. */
static struct table *table_for(struct pp_unwinder *u, uint32_t tgid, const uint32_t *relatives,
			       const struct pp_map_entry *e)
{
	char key[80], id_key[PP_FILE_ID_KEY_MAX], stat_key[PP_FILE_ID_KEY_MAX];
	uint8_t digest[PP_UNWIND_DIGEST_SIZE];
	struct pp_cfi_source *cs = NULL;
	bool digested;
	struct stat st;
	struct table *t;
	uint64_t h;
	int fd;

	/*
	 * A file the mapping names as it named a file an open confirmed lately: that file's
	 * table, without opening it again (an exec of a program the node runs all the time, a
	 * fork of a process read from /proc, cost no open).
	 */
	mapping_name(e, id_key, sizeof(id_key));
	t = table_named(u, id_key, IDENTITY_TTL_MS);
	if (t && (t->none || t->nr)) {
		u->st.tables_shared += t->nr != 0;
		u->st.tables_by_identity++;
		return t;
	}
	fd = open_mapped(u, tgid, relatives, e);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return NULL;
	}
	snprintf(stat_key, sizeof(stat_key), "s:%" PRIx64 ":%" PRIu64 ":%" PRId64 ".%09ld:%" PRId64,
		 (uint64_t)st.st_dev, (uint64_t)st.st_ino, (int64_t)st.st_ctim.tv_sec,
		 st.st_ctim.tv_nsec, (int64_t)st.st_size);
	t = table_named(u, stat_key, 0);
	if (t) {
		snprintf(key, sizeof(key), "%s", t->key);
		digested = t->has_digest;
		if (digested)
			memcpy(digest, t->digest, sizeof(digest));
	} else if (u->cache && pp_table_cache_digest_of(u->cache, &st, digest) == 0) {
		/* digested at an earlier start: the file has not changed since */
		digest_key(digest, key, sizeof(key));
		digested = true;
	} else if ((t = partial_new(u, fd, &st, stat_key))) {
		/* a big file no earlier start compiled: its rows found as walks reach them */
		table_found_as(u, t, stat_key, id_key);
		close(fd);
		return t;
	} else {
		file_key(fd, &st, key, sizeof(key), digest, &digested, &cs);
		if (digested && u->cache)
			pp_table_cache_note_digest(u->cache, &st, digest);
	}
	h = pp_hash_str(key);
	t = table_find(u, key, h);
	/* built, without CFI, or too big for the rows free when it was tried: not again */
	if (t && (t->none || t->nr || (t->no_room && t->no_room_frees == u->rows.frees))) {
		u->st.tables_shared += t->nr != 0;
		table_found_as(u, t, stat_key, id_key);
		pp_cfi_source_free(cs);
		close(fd);
		return t;
	}
	if (!t) {
		t = table_slot(u);
		if (!t) {
			pp_cfi_source_free(cs);
			close(fd);
			return NULL;
		}
		snprintf(t->key, sizeof(t->key), "%s", key);
		t->hash = h;
		t->in_use = 1;
		t->has_digest = digested;
		if (digested)
			memcpy(t->digest, digest, sizeof(t->digest));
	}
	/* new, or evicted before: compile (again) */
	u->st.tables_rebuilt += t->built_before;
	(void)table_build(u, t, fd, cs, e->path, digested ? digest : NULL);
	pp_cfi_source_free(cs);
	t->built_before |= t->nr != 0;
	table_found_as(u, t, stat_key, id_key);
	close(fd);
	return t;
}

/* The n tables held (their indexes, from make_list) let go, and the array freed. */
static void let_go(struct pp_unwinder *u, uint32_t *held, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct table *t = &u->tables[held[i]];

		if (t->users)
			t->users--;
	}
	free(held);
}

static void unhold(struct pp_unwinder *u, struct proc *p)
{
	let_go(u, p->tables, p->ntables);
	p->tables = NULL;
	p->ntables = 0;
}

static void do_release(struct pp_unwinder *u, uint32_t tgid)
{
	struct proc *p = proc_find(u, tgid, false);

	if (!p)
		return;
	unhold(u, p);
	u->sink.del_proc(u->sink.ctx, tgid, p->list_at);
	proc_del(u, p);
	u->st.procs_released++;
	u->st.procs_live--;
}

/*
 * The list of maps' executable mappings in u->scratch, each mapping's table in
 * u->scratch_tables (index + 1, 0 for none), for a process's list (shim: counted as the
 * lists written) or one walk's: the tables held (their indexes, *nheld of them; the caller
 * lets them go), or NULL without memory. *all: every executable mapping listed.
 */
static uint32_t *make_list(struct pp_unwinder *u, uint32_t tgid, const struct pp_maps *maps,
			   const uint32_t *relatives, bool shim, uint32_t *nheld, bool *all)
{
	struct pp_bpf_unwind_list *out = u->scratch;
	uint32_t *held = calloc(maps->n ? maps->n : 1, sizeof(*held)), files_left = 0;

	*nheld = 0;
	*all = true;
	if (!held)
		return NULL;
	memset(out, 0, sizeof(*out));
	u->tick++;
	for (size_t i = 0; i < maps->n; i++)
		files_left += (maps->entries[i].perms & PP_MAP_EXEC) &&
			      maps->entries[i].kind == PP_MAP_KIND_FILE;
	for (size_t i = 0; i < maps->n; i++) {
		const struct pp_map_entry *e = &maps->entries[i];
		struct pp_bpf_unwind_mapping *m;
		struct table *t;
		uint64_t vaddr;

		if (!(e->perms & PP_MAP_EXEC))
			continue;
		/*
		 * Code of no file (the vdso, JIT code) is listed too, without a table (frame
		 * pointers there), so that code outside the list is code mapped since: the shim
		 * copies the stacks that meet it. Files' mappings keep their room first.
		 */
		if (e->kind != PP_MAP_KIND_FILE) {
			if (out->nr + files_left < PP_UNWIND_MAX_MAPPINGS) {
				u->scratch_tables[out->nr] = 0;
				out->m[out->nr++] = (struct pp_bpf_unwind_mapping){
				    .start = e->start,
				    .end = e->end,
				};
			} else {
				*all = false;
			}
			continue;
		}
		files_left--;
		if (out->nr == PP_UNWIND_MAX_MAPPINGS) {
			u->st.mappings_cut += shim;
			*all = false;
			continue;
		}
		u->scratch_tables[out->nr] = 0;
		m = &out->m[out->nr++];
		m->start = e->start;
		m->end = e->end;
		u->st.mappings += shim;
		t = table_for(u, tgid, relatives, e);
		if (!t || !t->nr ||
		    pp_unwind_vaddr_of(t->loads, t->nloads, e->offset, 1, &vaddr) != 0) {
			if (shim) {
				u->st.mappings_no_table++;
				u->st.mappings_unopened += !t;
				u->st.mappings_no_cfi += t && !t->nr && !t->no_room;
				u->st.mappings_no_room += t && !t->nr && t->no_room;
				u->st.mappings_unplaced += t && t->nr;
			}
			continue;
		}
		t->users++;
		t->last_use = u->tick;
		held[(*nheld)++] = (uint32_t)(t - u->tables);
		u->scratch_tables[out->nr - 1] = (uint32_t)(t - u->tables) + 1;
		/* runtime = vaddr + (start - vaddr of the mapping's offset) */
		m->base = t->packed.base_vaddr + (e->start - vaddr);
		m->first_word = t->first;
		m->nr_pages = t->packed.nr_pages;
	}
	return held;
}

/*
 * Install tgid's list: from given (the side-band's mappings; relatives where its files are
 * found when it is gone), or else from /proc/PID/maps.
 */
static int do_install(struct pp_unwinder *u, uint32_t tgid, const struct pp_maps *given,
		      const uint32_t *relatives)
{
	uint64_t maps_hash = 0;
	struct pp_bpf_unwind_list *out = u->scratch;
	uint32_t *held = NULL, nheld = 0;
	bool all = true; /* every executable mapping listed */
	struct pp_maps maps;
	char path[300];
	size_t len = 0;
	struct proc *p;
	char *text;
	int ret;

	if (given) {
		maps = *given;
		u->st.procs_from_events++;
		goto listed;
	}
	snprintf(path, sizeof(path), "%s/%u/maps", u->proc_root, tgid);
	if (pp_read_text_whole(path, MAX_MAPS_BYTES, &text, &len))
		text = NULL;
	if (!text || !len) {
		free(text);
		u->st.procs_failed++;
		return text ? -ENODATA
			    : -ESRCH; /* a kernel thread has no maps; a gone process none */
	}
	{
		/* a rescan of maps that did not change (the usual case) has nothing to do */
		uint64_t h = hash_exec_lines(text, len);

		p = proc_find(u, tgid, false);
		if (p && p->maps_hash == h) {
			free(text);
			u->st.procs_unchanged++;
			return 0;
		}
		maps_hash = h;
	}
	ret = pp_maps_parse(text, len, &maps);
	free(text);
	if (ret) {
		u->st.procs_failed++;
		return ret;
	}
	u->st.maps_reads++;
listed:
	held = make_list(u, tgid, &maps, given ? relatives : NULL, true, &nheld, &all);
	if (!given)
		pp_maps_fini(&maps);
	if (!held)
		return -ENOMEM;
	p = proc_find(u, tgid, false);
	if (!p && u->st.procs_live >= u->procs_mask / 2) { /* the hash stays half empty */
		let_go(u, held, nheld);
		u->st.procs_dropped++;
		return -ENOSPC;
	}
	if (!p)
		p = proc_find(u, tgid, true);
	if (!p->tables && !p->ntables)
		u->st.procs_live++;
	unhold(u, p); /* a rescan: the new list's holds replace the old */
	p->tables = held;
	p->ntables = nheld;
	p->maps_hash = maps_hash;
	if (u->sink.read_rows) {
		struct pp_bpf_unwind_mapping *keep =
		    out->nr ? realloc(p->maps, out->nr * sizeof(*keep)) : NULL;
		uint32_t *kt = out->nr ? realloc(p->map_tables, out->nr * sizeof(*kt)) : NULL;

		p->maps = keep ? keep : p->maps;
		p->map_tables = kt ? kt : p->map_tables;
		if (keep && kt) {
			memcpy(p->maps, out->m, out->nr * sizeof(*keep));
			memcpy(p->map_tables, u->scratch_tables, out->nr * sizeof(*kt));
			p->nmaps = out->nr;
		} else {
			/* none, or no memory: its walks take frame pointers */
			free(p->maps);
			free(p->map_tables);
			p->maps = NULL;
			p->map_tables = NULL;
			p->nmaps = 0;
		}
	}
	/* the copies of walks meeting code outside the list are walked with the list kept */
	out->flags = all && p->nmaps ? PP_UW_PROC_ALL_MAPPINGS : 0;
	p->list_flags = out->flags;
	ret = u->sink.set_proc(u->sink.ctx, tgid, out, &p->list_at);
	if (ret) {
		if (ret == -ENOSPC)
			u->st.procs_no_room++;
		/* a list made before names the tables let go below: it goes too */
		u->sink.del_proc(u->sink.ctx, tgid, p->list_at);
		unhold(u, p);
		proc_del(u, p);
		u->st.procs_live--;
		return ret;
	}
	u->st.procs_installed++;
	return 0;
}

/* --- walks of stack copies (under work) --- */

struct walk_ctx {
	struct pp_unwinder *u;
	const struct proc *p;
	const struct later *w;
	uint32_t last;	     /* the mapping of the frame before */
	uint32_t partial[4]; /* partial tables whose code the walk reached first (index + 1) */
};

static const struct pp_bpf_unwind_mapping *walk_mapping(struct walk_ctx *c, uint64_t pc)
{
	const struct pp_bpf_unwind_mapping *m = c->p->maps;
	uint32_t lo = 0, hi = c->p->nmaps;

	if (c->last < hi && m[c->last].start <= pc && pc < m[c->last].end)
		return &m[c->last];
	if (!hi)
		return NULL;
	while (hi - lo > 1) { /* the last mapping starting at or below pc */
		uint32_t mid = lo + (hi - lo) / 2;

		if (m[mid].start <= pc)
			lo = mid;
		else
			hi = mid;
	}
	if (m[lo].start <= pc && pc < m[lo].end) {
		c->last = lo;
		return &m[lo];
	}
	return NULL;
}

/* The rule index for rel in a mapping's run of the row array, as the shim finds it. */
static bool walk_rule(struct walk_ctx *c, const struct pp_bpf_unwind_mapping *m, uint64_t rel,
		      uint32_t *rule)
{
	struct pp_unwinder *u = c->u;
	uint32_t page, bounds[2], n;
	const uint32_t *words;

	if (rel >> 32 || (rel >> PP_UW_PAGE_SHIFT) >= m->nr_pages)
		return false;
	page = (uint32_t)(rel >> PP_UW_PAGE_SHIFT);
	if ((uint64_t)m->first_word + page + 2 > u->sink.nr_rows ||
	    u->sink.read_rows(u->sink.ctx, m->first_word + page, 2, bounds))
		return false;
	n = pp_unwind_packed_page_rows(bounds[0], bounds[1], m->nr_pages,
				       u->sink.nr_rows - m->first_word);
	if (!n)
		return false;
	/* searched where the sink keeps them mapped; copied only where it does not */
	words =
	    u->sink.peek_rows ? u->sink.peek_rows(u->sink.ctx, m->first_word + bounds[0], n) : NULL;
	if (!words) {
		if (u->sink.read_rows(u->sink.ctx, m->first_word + bounds[0], n, u->walk_words))
			return false;
		words = u->walk_words;
	}
	return pp_unwind_packed_page_find(words, n, (uint32_t)rel & ((1u << PP_UW_PAGE_SHIFT) - 1),
					  rule);
}

/* Code of a partial table no walk reached before: its FDE found now (a miss, counted). */
static int walk_partial(struct walk_ctx *c, const struct pp_bpf_unwind_mapping *m, uint64_t pc,
			struct pp_unwind_row *row)
{
	struct pp_unwinder *u = c->u;
	uint32_t ti = c->p->map_tables ? c->p->map_tables[m - c->p->maps] : 0;
	struct table *t = ti && ti <= u->max_tables ? &u->tables[ti - 1] : NULL;

	if (!t || !t->partial)
		return u->tables_only ? -1 : 0;
	t->partial_misses++;
	u->partial_dirty = true;
	for (size_t i = 0; i < sizeof(c->partial) / sizeof(c->partial[0]); i++) {
		if (c->partial[i] == ti)
			break;
		if (!c->partial[i]) {
			c->partial[i] = ti;
			break;
		}
	}
	if (partial_find(u, t, pc - m->base + t->packed.base_vaddr, row) != 1)
		return u->tables_only ? -1 : 0;
	u->st.partial_frames++;
	row->pc = pc;
	return 1;
}

static int walk_find_row(void *ctx, uint64_t pc, struct pp_unwind_row *row)
{
	struct walk_ctx *c = ctx;
	const struct pp_bpf_unwind_mapping *m = walk_mapping(c, pc);
	const struct pp_bpf_unwind_rule *r;
	uint32_t idx;

	if (!m || !m->nr_pages)
		return c->u->tables_only ? -1 : 0; /* as the shim: frame pointers there */
	if (!walk_rule(c, m, pc - m->base, &idx) || !(r = pp_unwind_rules_at(c->u->rules, idx)) ||
	    r->cfa_rule == PP_UW_CFA_NONE)
		return c->u->tables_only ? -1 : 0; /* code the table does not cover */
	if (r->cfa_rule == PP_UW_CFA_DEFERRED)
		return walk_partial(c, m, pc, row);
	*row = pp_unwind_row_of_rule(r, pc);
	return 1;
}

/* 8 bytes of the copy: the stack as it was at the sample, nothing else. */
static int walk_read(void *ctx, uint64_t addr, uint64_t *out)
{
	const struct later *w = ((struct walk_ctx *)ctx)->w;
	uint64_t off = addr - w->stack_base;

	if (addr < w->stack_base || w->stack_len < sizeof(*out) ||
	    off > w->stack_len - sizeof(*out))
		return -EFAULT;
	memcpy(out, w->data + off, sizeof(*out));
	return 0;
}

static void walk_with(struct pp_unwinder *u, const struct proc *p, struct later *w);

/*
 * The copy w walked with the list of the image it was taken in, one its process has replaced
 * by an exec since (maps: that image's executable mappings, relatives where its files are
 * found): a list of its own for this walk, never written to the shim, its tables held for the
 * walk alone.
 */
static void do_walk_image(struct pp_unwinder *u, struct later *w, const struct pp_maps *maps,
			  const uint32_t *relatives)
{
	const struct pp_bpf_unwind_list *out = u->scratch;
	struct proc image = {.tgid = w->tgid};
	bool all;

	image.tables = make_list(u, w->tgid, maps, relatives, false, &image.ntables, &all);
	w->npcs = 0;
	w->status = -ENOMEM;
	if (!image.tables)
		return;
	image.maps = (struct pp_bpf_unwind_mapping *)out->m;
	image.map_tables = u->scratch_tables;
	image.nmaps = out->nr;
	image.list_flags = all && out->nr ? PP_UW_PROC_ALL_MAPPINGS : 0;
	walk_with(u, &image, w);
	u->st.walks_of_images++;
	unhold(u, &image);
}

static void do_walk(struct pp_unwinder *u, struct later *w)
{
	walk_with(u, proc_find(u, w->tgid, false), w);
}

static void walk_with(struct pp_unwinder *u, const struct proc *p, struct later *w)
{
	struct walk_ctx c = {.u = u, .p = p, .w = w};
	struct pp_unwind_ops ops = {.find_row = walk_find_row, .read_u64 = walk_read, .ctx = &c};

	w->npcs = 0;
	if (!p || !p->maps || !u->walk_words) {
		w->status = -ESRCH;
		return;
	}
	w->status = 0;
	w->npcs = pp_unwind_walk(&w->regs, &ops, w->pcs, u->max_frames, &w->why, &w->st);
	/*
	 * A copy that ended before the stack did, taken because the shim met code of a partial
	 * table: whole tables would have walked on in the kernel. Counted against the tables.
	 */
	if (w->why == PP_UNWIND_UNREADABLE)
		for (size_t i = 0; i < sizeof(c.partial) / sizeof(c.partial[0]) && c.partial[i];
		     i++)
			u->tables[c.partial[i] - 1].partial_short++;
}

/*
 * Room for one more copy (u->lock held): under both bounds, and in the queue. Every copy
 * queued becomes a walk done, so the walks done are bounded by all the walks held.
 */
static bool walk_room(const struct pp_unwinder *u)
{
	return u->walks_queued < PP_UNWIND_WALKS_MAX && u->walks < PP_UNWIND_WALKED_MAX &&
	       u->qlen < QUEUE_SIZE;
}

static struct pp_maps *exec_mappings(const struct pp_proc *p);

int pp_unwinder_walk_later(struct pp_unwinder *u, const struct pp_unwind_later *w)
{
	struct pp_maps *image_maps = NULL;
	struct later *l;
	bool queued = false;

	if (!u || !w || !w->stack_len || w->stack_len > PP_RAW_USTACK_MAX ||
	    w->blob_len > PP_SAMPLE_MAX_SIZE || (w->blob_len && !w->blob) || !w->stack)
		return -EINVAL;
	if (!u->sink.read_rows)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&u->lock);
	if (!walk_room(u)) {
		u->walks_refused++;
		pthread_mutex_unlock(&u->lock);
		return -ENOSPC;
	}
	pthread_mutex_unlock(&u->lock);
	if (w->image && !(image_maps = exec_mappings(w->image)))
		return -ENOMEM;
	l = malloc(sizeof(*l) + w->stack_len + w->blob_len);
	if (!l) {
		drop_maps(image_maps);
		return -ENOMEM;
	}
	memset(l, 0, sizeof(*l));
	l->tgid = w->tgid;
	l->regs = w->regs;
	l->stack_base = w->stack_base;
	l->stack_len = w->stack_len;
	l->blob_len = w->blob_len;
	memcpy(l->data, w->stack, w->stack_len);
	if (w->blob_len)
		memcpy(l->data + w->stack_len, w->blob, w->blob_len);
	pthread_mutex_lock(&u->lock);
	if (walk_room(u) &&
	    enqueue_maps(u, w->tgid, OP_WALK, image_maps, w->image ? w->image->relatives : NULL)) {
		u->queue[(u->qhead + u->qlen - 1) % QUEUE_SIZE].walk = l;
		u->walks++;
		u->walks_queued++;
		queued = true;
	} else {
		u->walks_refused++;
	}
	pthread_mutex_unlock(&u->lock);
	if (!queued) {
		free(l);
		drop_maps(image_maps);
		return -ENOSPC;
	}
	return 0;
}

size_t pp_unwinder_take_walked(struct pp_unwinder *u,
			       void (*fn)(void *ctx, const struct pp_unwind_walked *w), void *ctx)
{
	struct later *l;
	size_t n = 0;

	if (!u)
		return 0;
	pthread_mutex_lock(&u->lock);
	l = u->done_head;
	u->done_head = u->done_tail = NULL;
	pthread_mutex_unlock(&u->lock);
	while (l) {
		struct later *next = l->next;
		struct pp_unwind_walked w = {
		    .blob = l->data + l->stack_len,
		    .blob_len = l->blob_len,
		    .status = l->status,
		    .why = l->why,
		    .pcs = l->pcs,
		    .npcs = l->npcs,
		    .st = l->st,
		};

		fn(ctx, &w);
		free(l);
		l = next;
		n++;
	}
	pthread_mutex_lock(&u->lock);
	u->walks -= (uint32_t)n;
	pthread_mutex_unlock(&u->lock);
	return n;
}

uint32_t pp_unwinder_walks_waiting(struct pp_unwinder *u)
{
	uint32_t n;

	if (!u)
		return 0;
	pthread_mutex_lock(&u->lock);
	n = u->walks;
	pthread_mutex_unlock(&u->lock);
	return n;
}

/* Rows found waiting for their write, and PARTIAL_WRITE_MS since the last (under work). */
static bool partial_due(struct pp_unwinder *u)
{
	return u->partial_dirty && now_ms() - u->partial_written_ms >= PARTIAL_WRITE_MS;
}

/* partial_flush for a caller holding u->lock (the worker's wait, a drain): done under work. */
static void partial_flush_from_lock(struct pp_unwinder *u)
{
	pthread_mutex_unlock(&u->lock);
	pthread_mutex_lock(&u->work);
	partial_flush(u);
	pthread_mutex_unlock(&u->work);
	pthread_mutex_lock(&u->lock);
}

/* A walk done: its copy of the stack dropped, the sample behind it moved down. */
static struct later *walked_shrink(struct later *l)
{
	struct later *small;

	memmove(l->data, l->data + l->stack_len, l->blob_len);
	l->stack_len = 0;
	small = realloc(l, sizeof(*l) + l->blob_len);
	return small ? small : l;
}

static void run_op(struct pp_unwinder *u, const struct queued *q)
{
	uint32_t tgid = q->tgid, op = q->op;

	if (op == OP_WALK) {
		struct later *l;

		pthread_mutex_lock(&u->work);
		if (q->maps)
			do_walk_image(u, q->walk, q->maps, q->relatives);
		else
			do_walk(u, q->walk);
		if (partial_due(u))
			partial_flush(u);
		pthread_mutex_unlock(&u->work);
		drop_maps(q->maps);
		l = walked_shrink(q->walk);
		pthread_mutex_lock(&u->lock);
		l->next = NULL;
		if (u->done_tail)
			u->done_tail->next = l;
		else
			u->done_head = l;
		u->done_tail = l;
		u->walks_done++;
		u->walks_queued--;
		pthread_mutex_unlock(&u->lock);
		return;
	}
	pthread_mutex_lock(&u->work);
	if (op == OP_RELEASE) {
		do_release(u, tgid);
	} else {
		(void)do_install(u, tgid, q->maps, q->relatives);
	}
	pthread_mutex_unlock(&u->work);
	drop_maps(q->maps);
	if (op == OP_INSTALL) {
		struct seen *e;

		pthread_mutex_lock(&u->lock);
		e = seen_find(u, tgid);
		if (e) {
			/*
			 * Installed, or nothing to read (a kernel thread, a process gone while
			 * its last samples are still coming): a sample asks again after the
			 * rescan interval, not at once; the sweep forgets the gone ones.
			 */
			e->installed = 1;
			e->scanned_ms = now_ms();
		}
		pthread_mutex_unlock(&u->lock);
	}
}

/* Take the next queued operation (under lock): false when the queue is empty. */
static bool dequeue(struct pp_unwinder *u, struct queued *q)
{
	if (!u->qlen)
		return false;
	*q = u->queue[u->qhead];
	u->qhead = (u->qhead + 1) % QUEUE_SIZE;
	u->qlen--;
	return true;
}

/*
 * Processes whose exit was not seen (an exit event lost to a full ring, a sample that came
 * after it) would hold their entries for ever: every so often, and when the set is full,
 * the ones /proc no longer has are released.
 */
static void sweep(struct pp_unwinder *u)
{
	uint32_t *tgids, n = 0;
	char path[300];

	pthread_mutex_lock(&u->lock);
	tgids = malloc((size_t)(u->nseen ? u->nseen : 1) * sizeof(*tgids));
	for (uint32_t i = 0; tgids && i <= u->seen_mask; i++)
		if (u->seen[i].tgid)
			tgids[n++] = u->seen[i].tgid;
	u->sweep_wanted = false;
	pthread_mutex_unlock(&u->lock);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%u", u->proc_root, tgids[i]);
		if (access(path, F_OK) == 0 || errno != ENOENT)
			continue;
		pp_unwinder_release(u, tgids[i]);
		__atomic_add_fetch(&u->swept, 1, __ATOMIC_RELAXED);
	}
	free(tgids);
}

#define SWEEP_MS 5000

static void *worker(void *arg)
{
	struct pp_unwinder *u = arg;
	uint64_t last_sweep = now_ms();

	pthread_mutex_lock(&u->lock);
	for (;;) {
		struct queued q;

		while (!u->stop && !u->qlen) {
			struct timespec until;
			uint64_t wait_ms = SWEEP_MS;

			/*
			 * Rows found are written once due, and before a drain's sweep: only the
			 * worker runs walks, so partial_dirty is its own to read.
			 */
			if (u->partial_dirty && (u->sweep_wanted || partial_due(u))) {
				partial_flush_from_lock(u);
				continue;
			}
			if (u->sweep_wanted || now_ms() - last_sweep >= SWEEP_MS) {
				pthread_mutex_unlock(&u->lock);
				sweep(u);
				last_sweep = now_ms();
				pthread_mutex_lock(&u->lock);
				continue;
			}
			u->busy = false;
			pthread_cond_broadcast(&u->idle);
			if (u->partial_dirty) { /* not due yet: woken when it is */
				uint64_t since = now_ms() - u->partial_written_ms;

				wait_ms = since < PARTIAL_WRITE_MS ? PARTIAL_WRITE_MS - since : 0;
			}
			until = pp_deadline_after_ms(CLOCK_REALTIME, wait_ms);
			pthread_cond_timedwait(&u->cond, &u->lock, &until);
		}
		if (u->stop)
			break;
		u->busy = true;
		dequeue(u, &q);
		pthread_mutex_unlock(&u->lock);
		run_op(u, &q);
		pthread_mutex_lock(&u->lock);
	}
	u->busy = false;
	pthread_cond_broadcast(&u->idle);
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

struct pp_unwinder *pp_unwinder_new(const struct pp_unwinder_sink *sink,
				    const struct pp_unwinder_opts *opts)
{
	struct pp_unwinder *u = calloc(1, sizeof(*u));
	uint32_t slots;
	bool rows_ok;

	if (!u || !sink || !sink->nr_rows) {
		free(u);
		errno = EINVAL;
		return NULL;
	}
	u->sink = *sink;
	snprintf(u->proc_root, sizeof(u->proc_root), "%s",
		 opts && opts->proc_root ? opts->proc_root : "/proc");
	u->max_procs = opts && opts->max_procs ? opts->max_procs : PP_UNWIND_MAX_PROCS;
	u->max_tables = opts && opts->max_tables ? opts->max_tables : 4096;
	u->rescan_ms = opts && opts->rescan_ms ? opts->rescan_ms : 2000;
	u->found_kept_ms = now_ms(); /* what is found is kept found_keep_ms on, and at the end */
	u->found_keep_ms = opts && opts->found_keep_ms ? opts->found_keep_ms : PARTIAL_KEEP_MS;
	u->mmap_reports = opts && opts->mmap_reports;
	u->kick_by_caller = opts && opts->kick_by_caller;
	u->tables_only = opts && opts->tables_only;
	/* partial tables are found by walks of stack copies, which need the rows read back */
	u->partial_min_fdes = !sink->read_rows		       ? UINT32_MAX
			      : opts && opts->partial_min_fdes ? opts->partial_min_fdes
							       : PARTIAL_MIN_FDES;
	u->max_frames = opts && opts->max_frames && opts->max_frames < PP_MAX_STACK_DEPTH
			    ? opts->max_frames
			    : PP_MAX_STACK_DEPTH;
	u->self = opts && opts->include_self ? 0 : (uint32_t)getpid();
	slots = pow2_at_least(2 * u->max_procs);
	u->seen = calloc(slots, sizeof(*u->seen));
	u->procs = calloc(slots, sizeof(*u->procs));
	u->live_tgids = malloc(slots * sizeof(*u->live_tgids));
	u->seen_mask = u->procs_mask = slots - 1;
	u->tables = calloc(u->max_tables, sizeof(*u->tables));
	u->file_ids = pp_file_ids_new(2 * u->max_tables);
	u->scratch = malloc(sizeof(*u->scratch));
	rows_ok = pp_extents_init(&u->rows, sink->nr_rows) == 0;
	if (sink->read_rows) /* without it no walk is queued */
		u->walk_words = malloc(sizeof(*u->walk_words) << PP_UW_PAGE_SHIFT);
	u->rules = pp_unwind_rules_new(PP_UW_MAX_RULES);
	pthread_mutex_init(&u->lock, NULL);
	pthread_mutex_init(&u->work, NULL);
	pthread_cond_init(&u->cond, NULL);
	pthread_cond_init(&u->idle, NULL);
	if (!u->seen || !u->procs || !u->live_tgids || !u->tables || !u->file_ids || !rows_ok ||
	    !u->scratch || !u->rules || (sink->read_rows && !u->walk_words)) {
		pp_unwinder_free(u);
		errno = ENOMEM;
		return NULL;
	}
	u->st.rows_total = sink->nr_rows;
	if (opts && opts->table_cache_dir && opts->table_cache_dir[0]) {
		struct pp_table_cache_opts co = {.dir = opts->table_cache_dir,
						 .max_bytes = opts->table_cache_bytes};

		/* without it every start compiles every table again: worse, not wrong */
		u->cache = pp_table_cache_new(&co);
		if (!u->cache)
			pp_warn("unwind table cache %s: %s: tables are compiled at each start",
				opts->table_cache_dir,
				errno == EPERM ? "not this user's alone (others may write it)"
					       : strerror(errno));
	}
	if (opts && opts->worker) {
		int err = pthread_create(&u->thread, NULL, worker, u);

		if (err) {
			pp_unwinder_free(u);
			errno = err;
			return NULL;
		}
		pthread_setname_np(u->thread, "pp-unwinder"); /* top -H, perf: which thread */
		u->has_thread = true;
	}
	return u;
}

void pp_unwinder_free(struct pp_unwinder *u)
{
	if (!u)
		return;
	if (u->has_thread) {
		pthread_mutex_lock(&u->lock);
		u->stop = true;
		pthread_cond_signal(&u->cond);
		pthread_mutex_unlock(&u->lock);
		pthread_join(u->thread, NULL);
	}
	for (uint32_t i = 0; i < u->qlen; i++) {
		drop_maps(u->queue[(u->qhead + i) % QUEUE_SIZE].maps);
		free(u->queue[(u->qhead + i) % QUEUE_SIZE].walk);
	}
	while (u->done_head) {
		struct later *next = u->done_head->next;

		free(u->done_head);
		u->done_head = next;
	}
	/* the live ones: a walk over every slot touched 16,384 of them, most never used */
	for (uint32_t i = 0; u->procs && u->live_tgids && i < u->nlive; i++) {
		struct proc *p = proc_find(u, u->live_tgids[i], false);

		if (!p)
			continue;
		free(p->tables);
		free(p->maps);
		free(p->map_tables);
	}
	for (uint32_t i = 0; u->tables && i < u->tables_hwm; i++) {
		if (u->tables[i].in_use && u->tables[i].partial)
			partial_keep_found(u, &u->tables[i]);
		pp_unwind_packed_release(&u->tables[i].packed, NULL);
		partial_forget(&u->tables[i]);
	}
	pp_unwind_rules_free(u->rules);
	pp_table_cache_free(u->cache);
	pthread_mutex_destroy(&u->lock);
	pthread_mutex_destroy(&u->work);
	pthread_cond_destroy(&u->cond);
	pthread_cond_destroy(&u->idle);
	free(u->seen);
	free(u->procs);
	free(u->live_tgids);
	free(u->tables);
	pp_file_ids_free(u->file_ids);
	pp_extents_fini(&u->rows);
	free(u->scratch);
	free(u->walk_words);
	free(u->fde_rows);
	free(u);
}

/*
 * A process read while its dynamic loader was still mapping libraries misses them: the first
 * rescans come soon (25 ms, then doubling), later ones every rescan_ms (dlopen).
 */
static uint64_t rescan_after(const struct pp_unwinder *u, const struct seen *e)
{
	uint64_t ms = e->scans < 8 ? 25ull << e->scans : u->rescan_ms;

	return ms < u->rescan_ms ? ms : u->rescan_ms;
}

void pp_unwinder_note(struct pp_unwinder *u, uint32_t tgid)
{
	struct seen *e;

	/*
	 * Not the agent itself: its own tables (libcurl, libcrypto, libdw, ...) would be most
	 * of the compiling a node does, for stacks nobody asked about (they walk frame pointers).
	 */
	if (!u || !tgid || tgid == u->self)
		return;
	/* runs of samples of one process (the usual drain order): one look per 50 ms */
	if (tgid == u->note_tgid && now_ms() - u->note_ms < 50)
		return;
	u->note_tgid = tgid;
	u->note_ms = now_ms();
	pthread_mutex_lock(&u->lock);
	e = seen_find(u, tgid);
	if (!e) {
		e = seen_add(u, tgid);
		if (!e || !enqueue(u, tgid, OP_INSTALL)) {
			if (e)
				seen_del(u, e);
			u->st.procs_dropped++;
			u->sweep_wanted = true;
		}
	} else if (e->installed && !e->version && now_ms() - e->scanned_ms >= rescan_after(u, e)) {
		/* libraries loaded since (dlopen): read its maps again */
		e->scanned_ms = now_ms();
		e->scans++;
		enqueue(u, tgid, OP_INSTALL);
	}
	pthread_mutex_unlock(&u->lock);
}

static uint64_t proc_version(const struct pp_proc *p)
{
	return (p->generation << 32 | p->maps_version) + 1;
}

/* p's executable mappings, copied for the worker: NULL when out of memory. */
static struct pp_maps *exec_mappings(const struct pp_proc *p)
{
	struct pp_maps view = {0}, *out = calloc(1, sizeof(*out));
	struct pp_map_entry *ents = calloc(p->maps.n ? p->maps.n : 1, sizeof(*ents));

	if (!out || !ents)
		goto fail;
	view.entries = ents;
	for (size_t i = 0; i < p->maps.n; i++)
		if (p->maps.entries[i].perms & PP_MAP_EXEC)
			ents[view.n++] = p->maps.entries[i];
	if (pp_maps_copy(out, &view))
		goto fail;
	free(ents);
	return out;
fail:
	free(ents);
	free(out);
	return NULL;
}

void pp_unwinder_note_proc(struct pp_unwinder *u, const struct pp_proc *p)
{
	uint64_t version;
	struct pp_maps *maps;
	struct seen *e;
	bool added = false;

	/* a kernel thread has no user stack to walk and no maps to read */
	if (!u || !p || !p->pid || p->pid == u->self || (p->flags & PP_PROC_F_KTHREAD))
		return;
	/*
	 * A process read from /proc: read again now and then for the libraries it loads since,
	 * unless the kernel reports them; then its cached mappings (read once, by the process
	 * cache, and followed by the reports) are installed like a reported process's.
	 */
	if (!(p->flags & PP_PROC_F_EVENTS) &&
	    (!u->mmap_reports || (p->flags & PP_PROC_F_NO_MAPS) || !p->maps.n)) {
		pp_unwinder_note(u, p->pid);
		return;
	}
	version = proc_version(p);
	if (p->pid == u->note_tgid && version == u->note_version)
		return;
	u->note_tgid = p->pid;
	u->note_version = version;
	u->note_ms = now_ms();
	pthread_mutex_lock(&u->lock);
	e = seen_find(u, p->pid);
	if (e && e->version == version) {
		pthread_mutex_unlock(&u->lock);
		return;
	}
	pthread_mutex_unlock(&u->lock);
	maps = exec_mappings(p); /* outside the lock: the worker takes it per install */
	pthread_mutex_lock(&u->lock);
	e = seen_find(u, p->pid);
	if (!e) {
		e = seen_add(u, p->pid);
		added = e != NULL;
	}
	if (!e || !maps || !enqueue_maps(u, p->pid, OP_INSTALL, maps, p->relatives)) {
		if (added)
			seen_del(u, e);
		u->st.procs_dropped++;
		u->sweep_wanted = true;
		pthread_mutex_unlock(&u->lock);
		drop_maps(maps);
		return;
	}
	e->version = version;
	e->installed = 1; /* no /proc rescans: the side-band reports its changes */
	e->scanned_ms = now_ms();
	pthread_mutex_unlock(&u->lock);
}

/*
 * Every process the worker holds a list for was in the seen set when it was installed, so a
 * process not there has nothing to release: the exec and exit events of every other process
 * on the node cost no queued work.
 */
void pp_unwinder_release(struct pp_unwinder *u, uint32_t tgid)
{
	struct seen *e;

	if (!u || !tgid)
		return;
	pthread_mutex_lock(&u->lock);
	e = seen_find(u, tgid);
	if (e) {
		if (enqueue(u, tgid, OP_RELEASE)) {
			seen_del(u, e);
		} else { /* kept: the sweep releases it once it is gone */
			u->st.procs_dropped++;
			u->sweep_wanted = true;
		}
	}
	pthread_mutex_unlock(&u->lock);
}

int pp_unwinder_install(struct pp_unwinder *u, uint32_t tgid)
{
	struct seen *e;
	int ret;

	pthread_mutex_lock(&u->lock);
	e = seen_find(u, tgid);
	if (!e)
		e = seen_add(u, tgid);
	if (!e)
		u->st.procs_dropped++;
	pthread_mutex_unlock(&u->lock);
	if (!e)
		return -ENOSPC;
	pthread_mutex_lock(&u->work);
	ret = do_install(u, tgid, NULL, NULL);
	pthread_mutex_unlock(&u->work);
	pthread_mutex_lock(&u->lock);
	e = seen_find(u, tgid);
	if (e) { /* installed or not, a sample asks again after the rescan interval */
		e->installed = 1;
		e->scanned_ms = now_ms();
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

void pp_unwinder_kick(struct pp_unwinder *u)
{
	if (!u || !u->kick_by_caller)
		return;
	pthread_mutex_lock(&u->lock);
	if (u->kick_wanted) {
		u->kick_wanted = false;
		pthread_cond_signal(&u->cond);
	}
	pthread_mutex_unlock(&u->lock);
}

void pp_unwinder_drain(struct pp_unwinder *u)
{
	(void)pp_unwinder_drain_for(u, UINT64_MAX);
}

int pp_unwinder_drain_for(struct pp_unwinder *u, uint64_t timeout_ms)
{
	struct timespec until = pp_deadline_after_ms(CLOCK_REALTIME, timeout_ms); /* idle's clock */
	struct queued q;
	int ret = 0;

	if (!u)
		return 0;
	pthread_mutex_lock(&u->lock);
	if (u->has_thread) {
		/*
		 * The releases waiting for a batch, and, as the drain without a thread does, the
		 * processes gone since: one whose samples were read after its exit was installed
		 * again, and only a sweep releases it.
		 */
		u->sweep_wanted = true;
		u->busy = true; /* until the worker has swept and gone idle */
		pthread_cond_signal(&u->cond);
		while ((u->qlen || u->busy) && !ret)
			if (pthread_cond_timedwait(&u->idle, &u->lock, &until) == ETIMEDOUT)
				ret = u->qlen || u->busy ? -ETIMEDOUT : 0;
	} else {
		pthread_mutex_unlock(&u->lock);
		sweep(u);
		pthread_mutex_lock(&u->lock);
		while (dequeue(u, &q)) {
			pthread_mutex_unlock(&u->lock);
			run_op(u, &q);
			pthread_mutex_lock(&u->lock);
		}
		if (u->partial_dirty)
			partial_flush_from_lock(u);
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

void pp_unwinder_get_stats(struct pp_unwinder *u, struct pp_unwinder_stats *out)
{
	uint64_t dropped;

	pthread_mutex_lock(&u->lock);
	dropped = u->st.procs_dropped;
	pthread_mutex_unlock(&u->lock);
	pthread_mutex_lock(&u->work);
	*out = u->st;
	out->rules_used = pp_unwind_rules_count(u->rules);
	if (u->cache) {
		struct pp_table_cache_stats cs;

		pp_table_cache_get_stats(u->cache, &cs);
		out->cache_on = true;
		out->cache_stored = cs.stored;
		out->cache_refused = cs.refused;
		out->cache_identity_hits = cs.identity_hits;
		out->cache_trimmed = cs.trimmed;
		out->cache_failed = cs.failed;
		out->cache_bytes = cs.bytes;
	}
	pthread_mutex_unlock(&u->work);
	out->procs_dropped = dropped;
	out->procs_swept = __atomic_load_n(&u->swept, __ATOMIC_RELAXED);
	pthread_mutex_lock(&u->lock);
	out->walks_done = u->walks_done;
	out->walks_refused = u->walks_refused;
	pthread_mutex_unlock(&u->lock);
}

/* --- the shim's maps --- */

/*
 * The row array is read and written through mappings of 64 KiB pieces of it, kept between
 * calls and unmapped least recently used first, never the whole array: the kernel maps every
 * page of an array at mmap time, so all of it would be in the agent's RSS.
 * - Reads (the walks of stack copies) meet the same tables' pages again and again (libc's,
 *   the interpreter's). An mmap and munmap per read was a tenth of the agent's CPU under
 *   churn.
 * - An munmap costs more than its mmap: the kernel flushes the TLB of every CPU the agent's
 *   threads ran on, by interrupt (200 us on a 2-CPU VM). A churning node's walks and partial
 *   tables' writes meet 30-60 pieces in 20 s: 64 keep them all mapped (4 MiB at most), where
 *   16 for reads and a mapping per write unmapped 15 times a second.
 * - A write of up to two pieces goes through them (the partial tables' runs, rewritten every
 *   5 s at most). A larger one (a whole table's run) maps its own pages once.
 * BPF_MAP_UPDATE_BATCH costs the kernel a copy and an update per row (70 ms of system time
 * for 240k rows here): it remains for a kernel that refuses the mmap.
 */
#define BATCH_ROWS 4096 /* pairs of rows */
#define READ_PIECE (64u << 10)
#define READ_PIECES 64
#define WRITE_THROUGH_PIECES 2

/*
 * A run of unwind_mappings given back stays unused this long: a walk that read the list
 * before it was replaced or removed may still be reading it (a walk takes microseconds, in
 * an interrupt or under RCU), and must not find another process's mappings there.
 */
#define LIST_COOL_MS 1000

/*
 * Where a process's list lies, as the sink tells the unwinder to keep it: its run of
 * unwind_mappings, first << 32 | n (0: none).
 */
#define LIST_AT(first, n) ((uint64_t)(first) << 32 | (n))
#define LIST_FIRST(at) ((uint32_t)((at) >> 32))
#define LIST_N(at) ((uint32_t)(at))

/* A run given back at since_ms, reused once it cooled (LIST_COOL_MS). */
struct cooling_run {
	uint32_t first, n;
	uint64_t since_ms;
};

/*
 * Pieces of an mmapable array kept mapped, least recently used out: a mapping of a BPF array
 * is resident whole, so the agent maps the pieces it uses, never the array.
 */
struct pieces {
	int fd;
	uint64_t total; /* the array's bytes */
	struct {
		uint8_t *m; /* NULL: unused */
		uint64_t off, len, used;
	} p[READ_PIECES];
	uint64_t reads;
};

static uint8_t *map_piece(struct pieces *ps, uint64_t off, uint64_t *piece_off,
			  uint64_t *piece_len);

/* Copies len bytes to offset off of the array through its pieces: 0, or -errno. */
static int write_through(struct pieces *ps, uint64_t off, const void *src, uint64_t len)
{
	const uint8_t *from = src;
	uint64_t end = off + len;

	while (off < end) {
		uint64_t poff, plen, take;
		uint8_t *piece = map_piece(ps, off, &poff, &plen);

		if (!piece)
			return -errno;
		take = poff + plen - off < end - off ? poff + plen - off : end - off;
		memcpy(piece + (off - poff), from, (size_t)take);
		from += take;
		off += take;
	}
	return 0;
}

struct bpf_sink {
	struct pp_unwinder_sink sink;
	int rules_fd, procs_fd;
	bool no_mmap, no_batch; /* the kernel refused an array's mmap, its batch updates */
	/*
	 * the lists' entries (written through the pieces they are in, else by batch updates),
	 * their free runs, and the runs cooling in the order they were given back; where each
	 * process's run lies the unwinder keeps (LIST_AT)
	 */
	struct pp_extents free_slots;
	struct cooling_run *cooling;
	uint32_t cool_head, cool_n, cool_cap; /* a ring */
	uint32_t keys[BATCH_ROWS];
	uint64_t vals[BATCH_ROWS];
	struct pieces rows, entries;
};

/* Whether the pieces holding [off, end) of the row array are few enough to write through. */
static bool write_through_pieces(uint64_t off, uint64_t end)
{
	return end - (off & ~(uint64_t)(READ_PIECE - 1)) <= WRITE_THROUGH_PIECES * READ_PIECE;
}

static int write_rows_mmap(struct bpf_sink *b, uint32_t first, const uint32_t *words, uint32_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t off = (uint64_t)first * sizeof(*words);
	uint64_t start = off & ~(uint64_t)(page - 1);
	uint64_t end = off + (uint64_t)n * sizeof(*words);
	size_t len = (size_t)((end - start + page - 1) & ~(uint64_t)(page - 1));
	uint8_t *m;

	if (write_through_pieces(off, end))
		return write_through(&b->rows, off, words, end - off);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->rows.fd, (off_t)start);
	if (m == MAP_FAILED)
		return -errno;
	memcpy(m + (off - start), words, (size_t)n * sizeof(*words));
	munmap(m, len);
	return 0;
}

/*
 * n values of vsize bytes at keys into the array fd: one batch update where the kernel has
 * them (5.6+), else one update each.
 */
static int update_each(struct bpf_sink *b, int fd, const uint32_t *keys, const void *vals,
		       size_t vsize, uint32_t n)
{
	if (!n)
		return 0;
	if (!b->no_batch) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		uint32_t got = n;

		if (bpf_map_update_batch(fd, keys, vals, &got, &opts) == 0)
			return 0;
		if (errno != EINVAL && errno != ENOTSUP && errno != EOPNOTSUPP)
			return -errno;
		b->no_batch = true; /* a kernel without batch operations on arrays */
	}
	for (uint32_t i = 0; i < n; i++)
		if (bpf_map_update_elem(fd, &keys[i], (const uint8_t *)vals + i * vsize, BPF_ANY))
			return -errno;
	return 0;
}

/*
 * Without mmap, by map updates: the array holds the words in pairs (its values are 8-byte
 * aligned), so a pair only half in the run keeps its other word.
 */
static int write_rows_update(struct bpf_sink *b, uint32_t first, const uint32_t *words, uint32_t n)
{
	uint32_t k0 = first / 2, k1 = (first + n - 1) / 2;
	int ret;

	for (uint32_t k = k0; k <= k1;) {
		uint32_t count = k1 - k + 1 < BATCH_ROWS ? k1 - k + 1 : BATCH_ROWS;

		for (uint32_t i = 0; i < count; i++) {
			uint32_t pair[2];

			b->keys[i] = k + i;
			for (uint32_t h = 0; h < 2; h++) {
				uint32_t w = 2 * (k + i) + h;

				if (w >= first && w - first < n) {
					pair[h] = words[w - first];
				} else {
					uint64_t old = 0;

					(void)bpf_map_lookup_elem(b->rows.fd, &b->keys[i], &old);
					memcpy(&pair[h], (uint32_t *)&old + h, sizeof(pair[h]));
				}
			}
			memcpy(&b->vals[i], pair, sizeof(pair));
		}
		ret = update_each(b, b->rows.fd, b->keys, b->vals, sizeof(*b->vals), count);
		if (ret)
			return ret;
		k += count;
	}
	return 0;
}

static int bpf_write_rows(void *ctx, uint32_t first, const uint32_t *words, uint32_t n)
{
	struct bpf_sink *b = ctx;

	if ((uint64_t)first + n > b->sink.nr_rows)
		return -ERANGE;
	if (!n)
		return 0;
	if (!b->no_mmap) {
		if (write_rows_mmap(b, first, words, n) == 0)
			return 0;
		b->no_mmap = true;
	}
	return write_rows_update(b, first, words, n);
}

/* The mapped piece holding byte off of the array, mapped if need be; NULL: no mmap. */
static uint8_t *map_piece(struct pieces *ps, uint64_t off, uint64_t *piece_off, uint64_t *piece_len)
{
	uint64_t start = off & ~(uint64_t)(READ_PIECE - 1);
	uint64_t len = ps->total - start < READ_PIECE ? ps->total - start : READ_PIECE;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int victim = 0;
	uint8_t *m;

	for (int i = 0; i < READ_PIECES; i++) {
		if (ps->p[i].m && ps->p[i].off == start) {
			ps->p[i].used = ++ps->reads;
			*piece_off = start;
			*piece_len = ps->p[i].len;
			return ps->p[i].m;
		}
		if (!ps->p[i].m || ps->p[i].used < ps->p[victim].used)
			victim = i;
		if (!ps->p[i].m)
			break;
	}
	len = (len + page - 1) & ~(uint64_t)(page - 1);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, ps->fd, (off_t)start);
	if (m == MAP_FAILED)
		return NULL;
	if (ps->p[victim].m)
		munmap(ps->p[victim].m, ps->p[victim].len);
	ps->p[victim].m = m;
	ps->p[victim].off = start;
	ps->p[victim].len = len;
	ps->p[victim].used = ++ps->reads;
	*piece_off = start;
	*piece_len = len;
	return m;
}

static void pieces_unmap(struct pieces *ps)
{
	for (int i = 0; i < READ_PIECES; i++)
		if (ps->p[i].m)
			munmap(ps->p[i].m, ps->p[i].len);
}

/* Reads through the pieces kept mapped, else pair by pair. */
static int bpf_read_rows(void *ctx, uint32_t first, uint32_t n, uint32_t *out)
{
	struct bpf_sink *b = ctx;
	uint64_t off = (uint64_t)first * sizeof(*out), end = off + (uint64_t)n * sizeof(*out);
	uint8_t *dst = (uint8_t *)out;

	if ((uint64_t)first + n > b->sink.nr_rows)
		return -ERANGE;
	while (!b->no_mmap && off < end) {
		uint64_t poff, plen, take;
		const uint8_t *m = map_piece(&b->rows, off, &poff, &plen);

		if (!m)
			break;
		take = poff + plen - off < end - off ? poff + plen - off : end - off;
		memcpy(dst, m + (off - poff), (size_t)take);
		dst += take;
		off += take;
	}
	for (uint32_t w = (uint32_t)(off / sizeof(*out)); w < first + n;) { /* no mmap */
		uint32_t key = w / 2, pair[2];
		uint64_t v;

		if (bpf_map_lookup_elem(b->rows.fd, &key, &v))
			return -errno;
		memcpy(pair, &v, sizeof(pair));
		for (; w < first + n && w / 2 == key; w++)
			out[w - first] = pair[w & 1];
	}
	return 0;
}

/* In place, where one kept piece holds them whole. */
static const uint32_t *bpf_peek_rows(void *ctx, uint32_t first, uint32_t n)
{
	struct bpf_sink *b = ctx;
	uint64_t off = (uint64_t)first * sizeof(uint32_t), poff, plen;
	const uint8_t *m;

	if (b->no_mmap || !n || (uint64_t)first + n > b->sink.nr_rows)
		return NULL;
	m = map_piece(&b->rows, off, &poff, &plen);
	if (!m || off + (uint64_t)n * sizeof(uint32_t) > poff + plen)
		return NULL;
	return (const uint32_t *)(const void *)(m + (off - poff));
}

static int bpf_write_rule(void *ctx, uint32_t i, const struct pp_bpf_unwind_rule *rule)
{
	struct bpf_sink *b = ctx;

	return bpf_map_update_elem(b->rules_fd, &i, rule, BPF_ANY) ? -errno : 0;
}

/* A run no list names any more: free once it cooled. */
static void run_cool(struct bpf_sink *b, uint32_t first, uint32_t n)
{
	if (!n)
		return;
	if (b->cool_n == b->cool_cap) {
		uint32_t cap = b->cool_cap ? 2 * b->cool_cap : 256;
		struct cooling_run *c = malloc(cap * sizeof(*c));

		if (!c)
			return; /* lost to the lists until the agent restarts: never reused early */
		for (uint32_t i = 0; i < b->cool_n; i++)
			c[i] = b->cooling[(b->cool_head + i) % b->cool_cap];
		free(b->cooling);
		b->cooling = c;
		b->cool_cap = cap;
		b->cool_head = 0;
	}
	b->cooling[(b->cool_head + b->cool_n) % b->cool_cap] =
	    (struct cooling_run){first, n, now_ms()};
	b->cool_n++;
}

static void runs_reclaim(struct bpf_sink *b)
{
	uint64_t now = now_ms();

	while (b->cool_n && b->cooling[b->cool_head].since_ms + LIST_COOL_MS <= now) {
		const struct cooling_run *c = &b->cooling[b->cool_head];

		pp_extents_free(&b->free_slots, c->first, c->n);
		b->cool_head = (b->cool_head + 1) % b->cool_cap;
		b->cool_n--;
	}
}

/* A list's n entries into the run at first: through the pieces they are in, else by updates. */
static int write_entries(struct bpf_sink *b, uint32_t first, const struct pp_bpf_unwind_mapping *m,
			 uint32_t n)
{
	uint32_t keys[PP_UNWIND_MAX_MAPPINGS];

	if (((uint64_t)first + n) * sizeof(*m) > b->entries.total || n > PP_UNWIND_MAX_MAPPINGS)
		return -ERANGE;
	if (!b->no_mmap) {
		if (write_through(&b->entries, (uint64_t)first * sizeof(*m), m, n * sizeof(*m)) ==
		    0)
			return 0;
		b->no_mmap = true;
	}
	for (uint32_t i = 0; i < n; i++)
		keys[i] = first + i;
	return update_each(b, b->entries.fd, keys, m, sizeof(*m), n);
}

/*
 * The list's entries in a run of their own, then the process's value naming them: a walk
 * finds either the old list whole or the new one whole. The old run cools.
 */
static int bpf_set_proc(void *ctx, uint32_t tgid, const struct pp_bpf_unwind_list *p, uint64_t *at)
{
	struct bpf_sink *b = ctx;
	struct pp_bpf_unwind_proc v = {.nr = p->nr, .flags = p->flags};
	int ret;

	if (p->nr > PP_UNWIND_MAX_MAPPINGS || !tgid)
		return -EINVAL;
	runs_reclaim(b);
	if (p->nr && pp_extents_alloc(&b->free_slots, p->nr, &v.first))
		return -ENOSPC;
	ret = write_entries(b, v.first, p->m, p->nr);
	if (!ret && bpf_map_update_elem(b->procs_fd, &tgid, &v, BPF_ANY))
		ret = errno == E2BIG ? -ENOSPC : -errno; /* E2BIG: the procs map is full */
	if (ret) {					 /* never named: free at once */
		pp_extents_free(&b->free_slots, v.first, v.nr);
		return ret;
	}
	run_cool(b, LIST_FIRST(*at), LIST_N(*at));
	*at = LIST_AT(v.first, v.nr);
	return 0;
}

static void bpf_del_proc(void *ctx, uint32_t tgid, uint64_t at)
{
	struct bpf_sink *b = ctx;

	(void)bpf_map_delete_elem(b->procs_fd, &tgid);
	run_cool(b, LIST_FIRST(at), LIST_N(at));
}

struct pp_unwinder_sink *pp_unwinder_bpf_sink_new(int rows_fd, uint32_t nr_rows, int rules_fd,
						  int procs_fd, int mappings_fd, uint32_t nr_slots)
{
	struct bpf_sink *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	if (rows_fd < 0 || rules_fd < 0 || procs_fd < 0 || mappings_fd < 0 || !nr_slots) {
		free(b);
		errno = EBADF;
		return NULL;
	}
	if (pp_extents_init(&b->free_slots, nr_slots)) {
		free(b);
		errno = ENOMEM;
		return NULL;
	}
	b->entries.fd = mappings_fd;
	b->entries.total = (uint64_t)nr_slots * sizeof(struct pp_bpf_unwind_mapping);
	b->rows.fd = rows_fd;
	b->rows.total = (uint64_t)nr_rows * sizeof(uint32_t);
	b->rules_fd = rules_fd;
	b->procs_fd = procs_fd;
	b->sink = (struct pp_unwinder_sink){
	    .write_rows = bpf_write_rows,
	    .write_rule = bpf_write_rule,
	    .set_proc = bpf_set_proc,
	    .del_proc = bpf_del_proc,
	    .read_rows = bpf_read_rows,
	    .peek_rows = bpf_peek_rows,
	    .ctx = b,
	    .nr_rows = nr_rows,
	};
	return &b->sink;
}

void pp_unwinder_bpf_sink_free(struct pp_unwinder_sink *sink)
{
	struct bpf_sink *b = (struct bpf_sink *)sink;

	if (!b)
		return;
	pieces_unmap(&b->rows);
	pieces_unmap(&b->entries);
	pp_extents_fini(&b->free_slots);
	free(b->cooling);
	free(b);
}

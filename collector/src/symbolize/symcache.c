/*
 * The symbol table cache: entries per file identity (or per path, for a path that could not
 * even be stat'ed) in one LRU list and one hash table; tables are reference-counted and, when
 * they have a build id, also hashed by it so entries for copies of one binary share a table
 * (a copy is read, and shares only a table that names every address as it does).
 */
#include "symcache.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/elf_read.h"
#include "base/log.h"

/* A file's identity: all fields 64-bit, so the struct has no padding to hash. */
struct file_key {
	uint64_t dev;
	uint64_t ino;
	uint64_t size;
	int64_t mtime_sec;
	int64_t mtime_nsec;
};

struct table {
	struct pp_elf_symbols *syms;
	size_t refs;
	uint32_t hash;
	bool in_id_hash;
	struct table *hnext;
};

struct entry {
	struct entry *lru_prev, *lru_next; /* lru_next goes towards older entries */
	struct entry *hnext;
	uint32_t hash;
	struct file_key key;
	struct table *tab;   /* NULL: a remembered failure */
	int err;	     /* failures: the errno to report */
	uint64_t expires_ns; /* failures: forgotten after this */
};

/* A file as the kernel's side-band names it, and the key it was found under. */
struct id_slot {
	struct pp_file_identity id;
	struct file_key key;
	uint64_t verified_ns; /* when a get through an open last found the file so */
	uint8_t used;
};

/*
 * An identity stands for its file this long after an open last confirmed it: an inode
 * number freed and given to a new file (whose generation, on file systems made from an
 * image, may be 0 as well) misleads the lookup for at most this long.
 */
#define IDENTITY_TTL_NS (30 * 1000000000ull)

struct pp_symcache {
	size_t max_files;
	size_t max_bytes;
	size_t bytes; /* tables (each counted once) and entries held */
	size_t n;
	size_t nbuckets; /* a power of two, for both hashes */
	struct entry **buckets;
	struct table **id_buckets;
	struct id_slot *idents; /* nbuckets slots, one place each: the newest identity wins */
	struct entry *lru_head, *lru_tail;
	uint64_t negative_ttl_ns;
	unsigned int open_flags;
	const struct pp_debug_dirs *debug_dirs;
	struct pp_symbol_store *store;
	pp_debug_fetch_fn debug_fetch;
	void *debug_fetch_ctx;
	struct pp_symcache_stats stats;
};

static uint32_t fnv1a(const void *p, size_t len, uint32_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

#define FNV_SEED 2166136261u

static uint32_t key_hash(const struct file_key *k)
{
	return fnv1a(k, sizeof(*k), FNV_SEED);
}

static uint32_t id_hash(const char *id)
{
	return fnv1a(id, strlen(id), FNV_SEED);
}

static void key_from_stat(const struct stat *st, struct file_key *k)
{
	memset(k, 0, sizeof(*k));
	k->dev = (uint64_t)st->st_dev;
	k->ino = (uint64_t)st->st_ino;
	k->size = (uint64_t)st->st_size;
	k->mtime_sec = (int64_t)st->st_mtim.tv_sec;
	k->mtime_nsec = (int64_t)st->st_mtim.tv_nsec;
}

struct pp_symcache *pp_symcache_new(size_t max_files, size_t max_bytes)
{
	struct pp_symcache *c;
	size_t nb = 16;

	if (max_files == 0 || max_files > SIZE_MAX / 4 || max_bytes == 0) {
		errno = EINVAL;
		return NULL;
	}
	while (nb < max_files * 2)
		nb *= 2;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto out_nomem;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	c->id_buckets = calloc(nb, sizeof(*c->id_buckets));
	c->idents = calloc(nb, sizeof(*c->idents));
	if (!c->buckets || !c->id_buckets || !c->idents)
		goto out_free;
	c->nbuckets = nb;
	c->max_files = max_files;
	c->max_bytes = max_bytes;
	c->negative_ttl_ns = (uint64_t)PP_SYMCACHE_NEGATIVE_TTL_MS_DEFAULT * 1000000u;
	return c;

out_free:
	free(c->buckets);
	free(c->id_buckets);
	free(c->idents);
	free(c);
out_nomem:
	errno = ENOMEM;
	return NULL;
}

static void table_put(struct pp_symcache *c, struct table *t)
{
	if (!t || --t->refs > 0)
		return;
	if (t->in_id_hash) {
		struct table **pp = &c->id_buckets[t->hash & (c->nbuckets - 1)];

		while (*pp && *pp != t)
			pp = &(*pp)->hnext;
		if (*pp)
			*pp = t->hnext;
	}
	c->bytes -= sizeof(*t) + pp_elf_symbols_bytes(t->syms);
	pp_elf_symbols_free(t->syms);
	free(t);
}

/* A table of the same build id that names every address as syms does, or NULL. */
static struct table *table_same(struct pp_symcache *c, const char *id,
				const struct pp_elf_symbols *syms)
{
	uint32_t h = id_hash(id);

	for (struct table *t = c->id_buckets[h & (c->nbuckets - 1)]; t; t = t->hnext) {
		if (t->hash == h && strcmp(pp_elf_symbols_build_id(t->syms), id) == 0 &&
		    pp_elf_symbols_same(t->syms, syms))
			return t;
	}
	return NULL;
}

/* A table for syms; later copies of the binary may share it only when shareable. */
static struct table *table_new(struct pp_symcache *c, struct pp_elf_symbols *syms, bool shareable)
{
	struct table *t = calloc(1, sizeof(*t));
	const char *id = pp_elf_symbols_build_id(syms);

	if (!t)
		return NULL;
	t->syms = syms;
	t->refs = 1;
	c->bytes += sizeof(*t) + pp_elf_symbols_bytes(syms);
	if (id[0] && shareable) {
		struct table **b;

		t->hash = id_hash(id);
		b = &c->id_buckets[t->hash & (c->nbuckets - 1)];
		t->hnext = *b;
		*b = t;
		t->in_id_hash = true;
	}
	return t;
}

static void lru_unlink(struct pp_symcache *c, struct entry *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		c->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		c->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(struct pp_symcache *c, struct entry *e)
{
	e->lru_prev = NULL;
	e->lru_next = c->lru_head;
	if (c->lru_head)
		c->lru_head->lru_prev = e;
	c->lru_head = e;
	if (!c->lru_tail)
		c->lru_tail = e;
}

static size_t entry_bytes(const struct entry *e)
{
	return sizeof(*e);
}

static void entry_remove(struct pp_symcache *c, struct entry *e)
{
	struct entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(c, e);
	table_put(c, e->tab);
	c->bytes -= entry_bytes(e);
	free(e);
	c->n--;
}

/*
 * Insert e (hash set), evicting the least recently used entries while the cache is over
 * either bound: its table, if new, is counted already, so room is made for it too.
 */
static void entry_insert(struct pp_symcache *c, struct entry *e)
{
	struct entry **b;

	c->bytes += entry_bytes(e);
	while ((c->n >= c->max_files || c->bytes > c->max_bytes) && c->lru_tail) {
		entry_remove(c, c->lru_tail);
		c->stats.evictions++;
	}
	b = &c->buckets[e->hash & (c->nbuckets - 1)];
	e->hnext = *b;
	*b = e;
	lru_push_front(c, e);
	c->n++;
}

static struct entry *find_key(struct pp_symcache *c, const struct file_key *k)
{
	uint32_t h = key_hash(k);

	for (struct entry *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext) {
		if (e->hash == h && memcmp(&e->key, k, sizeof(*k)) == 0)
			return e;
	}
	return NULL;
}

/* Remember a failure unless failures are not remembered; allocation failure costs only that. */
static void remember_failure(struct pp_symcache *c, const struct file_key *key, int err,
			     uint64_t now)
{
	struct entry *e;

	if (c->negative_ttl_ns == 0)
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->key = *key;
	e->hash = key_hash(key);
	e->err = err;
	/* the same file will not fit, or be whole, later either: asked again once evicted */
	e->expires_ns = err == EFBIG || err == ENXIO || now > UINT64_MAX - c->negative_ttl_ns
			    ? UINT64_MAX
			    : now + c->negative_ttl_ns;
	entry_insert(c, e);
}

/* A live entry (hit) or NULL; an expired failure is dropped on the way. */
static struct entry *live(struct pp_symcache *c, struct entry *e, uint64_t now)
{
	if (e && !e->tab && now >= e->expires_ns) {
		entry_remove(c, e);
		return NULL;
	}
	return e;
}

/* pp_symcache_open_debug_file, telling whether the file came from inside root (*in_root) */
static int open_debug(struct pp_symcache *c, const struct pp_elf_symbols *syms, const char *root,
		      const char *name, enum pp_symbol_source *src, bool *in_root)
{
	char found[PATH_MAX + 32] = "";
	struct pp_debug_target t = {
	    .root = root,
	    .path = name,
	    .build_id = pp_elf_symbols_build_id(syms),
	    .debuglink = pp_elf_symbols_debuglink(syms),
	};
	int fd = -ENOENT;

	if (!t.build_id[0] && !t.debuglink[0])
		return -ENOENT;
	t.has_crc = pp_elf_symbols_debuglink_crc(syms, &t.crc) == 0;
	*src = PP_SYMBOLS_DEBUG_FILE;
	if (c->debug_dirs && name && name[0] == '/') {
		fd = pp_debug_file_open(c->debug_dirs, &t, found, sizeof(found));
		*in_root = fd >= 0 && strncmp(found, "host:", 5) != 0;
	}
	if (fd < 0 && c->debug_fetch && t.build_id[0]) {
		fd = c->debug_fetch(c->debug_fetch_ctx, t.build_id);
		*src = PP_SYMBOLS_DEBUGINFOD;
	}
	return fd < 0 ? -ENOENT : fd;
}

int pp_symcache_open_debug_file(struct pp_symcache *c, const struct pp_elf_symbols *syms,
				const char *root, const char *name, enum pp_symbol_source *src)
{
	bool in_root = false;

	return open_debug(c, syms, root, name, src, &in_root);
}

/*
 * A stripped file's symbols from its separate debug file: on disk first, then from the
 * fetcher. Failures only leave the file's own (.dynsym) names. *in_root: the debug file came
 * from inside the process's root, which its container controls.
 */
static void add_debug_symbols(struct pp_symcache *c, struct pp_elf_symbols *syms, const char *root,
			      const char *name, bool *in_root)
{
	enum pp_symbol_source src;
	struct pp_elf_symbols *debug;
	int fd;

	if (pp_elf_symbols_has_symtab(syms) || (c->open_flags & PP_ELF_OPEN_NO_SYMBOLS))
		return;
	if (!pp_elf_symbols_build_id(syms)[0] && !pp_elf_symbols_debuglink(syms)[0])
		return;
	fd = open_debug(c, syms, root, name, &src, in_root);
	if (fd < 0) {
		c->stats.debug_missing++;
		return;
	}
	debug = pp_elf_symbols_open_fd(fd);
	close(fd);
	if (!debug || pp_elf_symbols_adopt(syms, debug, src) != 0) {
		pp_elf_symbols_free(debug);
		c->stats.debug_errors++;
		return;
	}
	if (src == PP_SYMBOLS_DEBUGINFOD)
		c->stats.debug_fetched++;
	else
		c->stats.debug_files++;
}

/*
 * A file the headers of which claim more than the caps allow, or bytes a sparse file does not
 * have: refused, remembered until evicted, and said once (the failure is remembered).
 */
static void note_refusal(struct pp_symcache *c, const char *name, int err)
{
	if (err == EFBIG)
		c->stats.too_big++;
	else
		c->stats.refused++;
	pp_warn("symbols: refused %s: %s", name && name[0] ? name : "a mapped file",
		err == EFBIG ? "its headers claim more than the caps, or its tables more than the "
			       "symbol cache's bound"
			     : pp_elf_refusal_name(-err));
}

/* Read the file behind fd for a miss: an entry holding its table, or NULL with errno set. */
/*
 * The table of the file behind fd itself (st: its fstat, a regular file): from the store while
 * the file is unchanged, else built (and kept there). NULL with errno as
 * pp_elf_symbols_open_fd_limited.
 */
static struct pp_elf_symbols *own_table(struct pp_symcache *c, int fd, const struct stat *st)
{
	size_t bound = c->max_bytes - sizeof(struct table);
	struct pp_elf_symbols *syms;
	bool stored = c->store && !c->open_flags;

	if (stored && (syms = pp_symbol_store_get(c->store, st, bound))) {
		c->stats.from_store++;
		return syms;
	}
	syms = pp_elf_symbols_open_fd_limited(fd, c->open_flags, bound);
	if (syms && stored)
		(void)pp_symbol_store_put(c->store, st, syms); /* counted there */
	return syms;
}

static struct entry *load(struct pp_symcache *c, int fd, const struct stat *st, const char *root,
			  const char *name, const struct file_key *key, uint64_t now)
{
	char id[PP_BUILD_ID_HEX_SIZE];
	struct pp_elf_symbols *syms;
	struct table *tab = NULL;
	bool debug_in_root = false;
	struct entry *e;
	int err;

	err = -pp_elf_read_build_id_fd(fd, id, sizeof(id));
	if (err)
		goto out_fail;
	syms = own_table(c, fd, st);
	if (!syms) {
		err = errno;
		goto out_fail;
	}
	c->stats.opens++;
	add_debug_symbols(c, syms, root, name, &debug_in_root);
	/* one table past the whole bound would evict everything and still not fit */
	if (sizeof(struct table) + pp_elf_symbols_bytes(syms) > c->max_bytes) {
		pp_elf_symbols_free(syms);
		err = EFBIG;
		goto out_fail;
	}
	/*
	 * A copy of a binary (another container's) takes the table of one with its build id only
	 * where both name every address alike: a file that claims another's build id, a hostile
	 * container's, neither lends its names to the other's frames nor takes theirs; names from
	 * a debug file inside a process's root, which its container controls, stay that root's.
	 */
	if (id[0] && !debug_in_root)
		tab = table_same(c, id, syms);
	if (tab) {
		pp_elf_symbols_free(syms);
		tab->refs++;
		c->stats.shared_by_build_id++;
	} else {
		tab = table_new(c, syms, !debug_in_root);
		if (!tab) {
			pp_elf_symbols_free(syms);
			errno = ENOMEM;
			return NULL;
		}
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		table_put(c, tab);
		errno = ENOMEM;
		return NULL;
	}
	e->key = *key;
	e->hash = key_hash(key);
	e->tab = tab;
	entry_insert(c, e);
	return e;

out_fail:
	c->stats.open_failures++;
	if (err == EFBIG || err == ENXIO)
		note_refusal(c, name, err);
	remember_failure(c, key, err, now);
	errno = err;
	return NULL;
}

const struct pp_elf_symbols *pp_symcache_get_file(struct pp_symcache *c, const char *path,
						  const char *expected_build_id)
{
	const struct pp_elf_symbols *syms;
	int fd, saved;

	if (!c || !path) {
		errno = EINVAL;
		return NULL;
	}
	/* O_NONBLOCK: a FIFO at the path must not block the open */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		c->stats.misses++;
		c->stats.open_failures++;
		return NULL;
	}
	syms = pp_symcache_get_fd(c, fd, NULL, path, expected_build_id);
	saved = errno;
	close(fd);
	errno = saved;
	return syms;
}

const struct pp_elf_symbols *pp_symcache_get_fd(struct pp_symcache *c, int fd, const char *root,
						const char *name, const char *expected_build_id)
{
	struct file_key key;
	struct stat st;
	struct entry *e;
	uint64_t now;
	const char *id;

	if (!c || fd < 0) {
		errno = EINVAL;
		return NULL;
	}
	now = pp_clock_ns(CLOCK_MONOTONIC);
	if (fstat(fd, &st) != 0)
		return NULL;
	if (!S_ISREG(st.st_mode)) {
		errno = ENOEXEC;
		return NULL;
	}
	key_from_stat(&st, &key);
	e = live(c, find_key(c, &key), now);
	if (e) {
		c->stats.hits++;
		lru_unlink(c, e);
		lru_push_front(c, e);
		if (!e->tab) {
			c->stats.negative_hits++;
			errno = e->err;
			return NULL;
		}
	} else {
		c->stats.misses++;
		e = load(c, fd, &st, root, name, &key, now);
		if (!e)
			return NULL;
	}
	id = pp_elf_symbols_build_id(e->tab->syms);
	if (expected_build_id && expected_build_id[0] && strcasecmp(expected_build_id, id) != 0) {
		c->stats.build_id_mismatch++;
		errno = ESTALE;
		return NULL;
	}
	return e->tab->syms;
}

void pp_symcache_set_store(struct pp_symcache *c, struct pp_symbol_store *store)
{
	if (c)
		c->store = store;
}

void pp_symcache_set_debug_dirs(struct pp_symcache *c, const struct pp_debug_dirs *dirs)
{
	if (c)
		c->debug_dirs = dirs;
}

void pp_symcache_set_debug_fetch(struct pp_symcache *c, pp_debug_fetch_fn fn, void *ctx)
{
	if (!c)
		return;
	c->debug_fetch = fn;
	c->debug_fetch_ctx = ctx;
}

void pp_symcache_set_open_flags(struct pp_symcache *c, unsigned int flags)
{
	if (c)
		c->open_flags = flags;
}

size_t pp_symcache_forget_build_id(struct pp_symcache *c, const char *build_id)
{
	struct entry *e, *older;
	size_t n = 0;

	if (!c || !build_id || !build_id[0])
		return 0;
	for (e = c->lru_head; e; e = older) {
		older = e->lru_next;
		if (e->tab && strcasecmp(pp_elf_symbols_build_id(e->tab->syms), build_id) == 0) {
			entry_remove(c, e);
			n++;
		}
	}
	c->stats.forgotten += n;
	return n;
}

void pp_symcache_set_negative_ttl_ms(struct pp_symcache *c, uint64_t ttl_ms)
{
	if (c)
		c->negative_ttl_ns =
		    ttl_ms > UINT64_MAX / 1000000u ? UINT64_MAX : ttl_ms * 1000000u;
}

void pp_symcache_free(struct pp_symcache *c)
{
	if (!c)
		return;
	while (c->lru_head)
		entry_remove(c, c->lru_head);
	free(c->buckets);
	free(c->id_buckets);
	free(c->idents);
	free(c);
}

size_t pp_symcache_size(const struct pp_symcache *c)
{
	return c ? c->n : 0;
}

size_t pp_symcache_bytes(const struct pp_symcache *c)
{
	return c ? c->bytes : 0;
}

void pp_symcache_get_stats(const struct pp_symcache *c, struct pp_symcache_stats *out)
{
	if (!out)
		return;
	if (!c) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = c->stats;
}

static struct id_slot *ident_slot(const struct pp_symcache *c, const struct pp_file_identity *id)
{
	uint32_t h = fnv1a(id, sizeof(*id), FNV_SEED);

	return &c->idents[h & (c->nbuckets - 1)];
}

const struct pp_elf_symbols *pp_symcache_get_identity(struct pp_symcache *c,
						      const struct pp_file_identity *id)
{
	struct id_slot *slot;
	struct entry *e;

	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);

	if (!c || !c->idents || !id || !id->inode) {
		errno = EINVAL;
		return NULL;
	}
	slot = ident_slot(c, id);
	if (!slot->used || memcmp(&slot->id, id, sizeof(*id)) ||
	    now - slot->verified_ns > IDENTITY_TTL_NS) {
		errno = ENOENT;
		return NULL;
	}
	e = live(c, find_key(c, &slot->key), now);
	if (!e || !e->tab) {
		errno = ENOENT;
		return NULL;
	}
	c->stats.hits++;
	c->stats.identity_hits++;
	lru_unlink(c, e);
	lru_push_front(c, e);
	return e->tab->syms;
}

void pp_symcache_add_identity(struct pp_symcache *c, const struct pp_file_identity *id, int fd)
{
	struct id_slot *slot;
	struct stat st;

	if (!c || !c->idents || !id || !id->inode || fstat(fd, &st) != 0)
		return;
	slot = ident_slot(c, id);
	slot->id = *id;
	key_from_stat(&st, &slot->key);
	slot->verified_ns = pp_clock_ns(CLOCK_MONOTONIC);
	slot->used = 1;
}

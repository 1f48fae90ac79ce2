/*
 * The per-process cache: a hash table of processes keyed by tgid with two LRU lists (live and
 * exited, so exited processes are evicted first), a small direct-mapped negative cache of pids
 * found gone, and per-process rate limits on rereading /proc. Everything is read relative to a
 * configurable proc root so tests can point it at fixture trees.
 */
#include "proc_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"

#define DEFAULT_PROC_ROOT "/proc"
#define DEFAULT_NEG_CAPACITY 256
#define DEFAULT_NEG_TTL_NS 1000000000ull
#define DEFAULT_RELOAD_GAP_NS 200000000ull
#define DEFAULT_MAX_MAPS_BYTES (64u << 20)
#define DEFAULT_MAX_BYTES (16u << 20)
#define DEFAULT_EXITED_TTL_NS (30 * 1000000000ull)
/* A scratch buffer grown past this for one large maps file is given back after the read. */
#define SCRATCH_KEEP_BYTES (256u << 10)
#define STAT_BUF_LEN 4096
#define PF_KTHREAD_FLAG 0x00200000u /* include/linux/sched.h PF_KTHREAD */
#define DELETED_SUFFIX " (deleted)"

struct link {
	struct link *prev, *next;
};

struct node {
	struct pp_proc proc;
	struct node *hnext;
	struct link lru;
	uint64_t checked_ns; /* last pid-reuse check of an exited entry */
	uint64_t exec_ns;    /* sample clock of the exec that made the entry stale; 0: unknown */
	size_t bytes;	     /* what the entry holds, as counted in the cache's bytes */
	uint64_t exited_ns;  /* cache clock when it was marked exited */
	/*
	 * Side-band entries: the images before the last exec, newest first, for samples taken
	 * before it that arrive after it (NULL: none), and the sample clock of the fork or exec
	 * that made the current image (records older than it describe an earlier one).
	 */
	struct image *prev;
	uint64_t born_ns;
};

/*
 * An image a side-band exec replaced, from born_ns (0: since before the agent looked) to the
 * birth of the image after it. A wrapper chain (a shell, env, a version manager's shims, the
 * program) execs up to six times within one read of the side-band, and each image's samples
 * need their own.
 */
struct image {
	struct pp_proc proc;
	uint64_t born_ns;
	struct image *older;
};

#define PREV_IMAGES_MAX 8

struct neg_slot {
	uint32_t pid;
	uint32_t used;
	uint64_t expires_ns;
};

struct pp_proc_cache {
	char *root;
	size_t capacity, count;
	size_t max_bytes, bytes; /* entries' memory, bounded */
	uint64_t exited_ttl_ns;	 /* exited entries are dropped this long after the exit */
	struct node **buckets;
	unsigned bucket_bits;
	struct link live, exited; /* next = most recently used */
	struct neg_slot *neg;
	unsigned neg_bits;
	uint64_t neg_ttl_ns, reload_gap_ns;
	size_t max_maps_bytes;
	uint64_t (*now_fn)(void *ctx);
	void *clock_ctx;
	uint64_t generation_seq;
	char *scratch;
	size_t scratch_cap;
	struct pp_proc_cache_stats st;
};

static uint64_t monotonic_ns(void *ctx)
{
	(void)ctx;
	return pp_clock_ns(CLOCK_MONOTONIC);
}

static uint64_t now_ns(const struct pp_proc_cache *c)
{
	return c->now_fn(c->clock_ctx);
}

static unsigned hash_pid(uint32_t pid, unsigned bits)
{
	return (uint32_t)(pid * 0x9E3779B1u) >> (32 - bits);
}

static unsigned bits_for(size_t n)
{
	unsigned bits = 4;

	while (bits < 30 && ((size_t)1 << bits) < n)
		bits++;
	return bits;
}

/* ---- LRU lists ---- */

static void list_init(struct link *head)
{
	head->prev = head->next = head;
}

static void list_del(struct link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}

static void list_add_front(struct link *head, struct link *l)
{
	l->next = head->next;
	l->prev = head;
	head->next->prev = l;
	head->next = l;
}

static struct node *node_of_link(struct link *l)
{
	return (struct node *)((char *)l - offsetof(struct node, lru));
}

static struct node *node_of_proc(const struct pp_proc *p)
{
	return (struct node *)((char *)(uintptr_t)p - offsetof(struct node, proc));
}

static void touch(struct pp_proc_cache *c, struct node *n)
{
	list_del(&n->lru);
	list_add_front(n->proc.flags & PP_PROC_F_EXITED ? &c->exited : &c->live, &n->lru);
}

/* ---- hash table ---- */

static struct node *lookup(const struct pp_proc_cache *c, uint32_t pid)
{
	struct node *n = c->buckets[hash_pid(pid, c->bucket_bits)];

	while (n && n->proc.pid != pid)
		n = n->hnext;
	return n;
}

static void proc_release(struct pp_proc *p)
{
	free(p->exe);
	p->exe = NULL;
	pp_maps_fini(&p->maps);
}

/* Lets go of the images older than *link, and sets *link NULL. */
static void drop_images(struct image **link)
{
	struct image *img = *link;

	*link = NULL;
	while (img) {
		struct image *older = img->older;

		proc_release(&img->proc);
		free(img);
		img = older;
	}
}

static void drop_prev(struct node *n)
{
	drop_images(&n->prev);
}

/* The replaced image of n a record at time_ns belongs to, or NULL: older than every one kept. */
static struct image *image_at(struct node *n, uint64_t time_ns)
{
	struct image *img = n->prev;

	while (img && time_ns < img->born_ns)
		img = img->older;
	return img;
}

static void node_remove(struct pp_proc_cache *c, struct node *n)
{
	struct node **pp = &c->buckets[hash_pid(n->proc.pid, c->bucket_bits)];

	while (*pp && *pp != n)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = n->hnext;
	list_del(&n->lru);
	proc_release(&n->proc);
	drop_prev(n);
	c->bytes -= n->bytes;
	free(n);
	c->count--;
}

/* What an entry holds: the node, its exe path, its maps and their paths. */
static size_t node_bytes(const struct node *n)
{
	size_t b = sizeof(*n) + (n->proc.exe ? strlen(n->proc.exe) + 1 : 0);

	b += pp_maps_bytes(&n->proc.maps);
	for (const struct image *img = n->prev; img; img = img->older)
		b += sizeof(*img) + (img->proc.exe ? strlen(img->proc.exe) + 1 : 0) +
		     pp_maps_bytes(&img->proc.maps);
	return b;
}

/* Counts n again after its contents changed. */
static void account(struct pp_proc_cache *c, struct node *n)
{
	c->bytes -= n->bytes;
	n->bytes = node_bytes(n);
	c->bytes += n->bytes;
}

static void evict_one(struct pp_proc_cache *c)
{
	struct link *victim = c->exited.prev != &c->exited ? c->exited.prev : c->live.prev;

	if (victim == &c->live)
		return;
	node_remove(c, node_of_link(victim));
	c->st.evictions++;
}

/*
 * A process that exited long ago has no samples left in flight: its entry only holds memory.
 * Exited entries are dropped exited_ttl_ns after the exit (oldest first, on a miss), so a
 * node that spawns 50 processes a second does not keep thousands of them.
 */
static void expire_exited(struct pp_proc_cache *c, uint64_t now)
{
	for (struct link *l = c->exited.prev; l != &c->exited;) {
		struct node *n = node_of_link(l);

		/* the list is in use order, nearly exit order: stop at the first one still young */
		if (now - n->exited_ns < c->exited_ttl_ns)
			break;
		l = l->prev;
		node_remove(c, n);
		c->st.expired++;
	}
}

/*
 * Evicts (exited first, then least recently used) while the cache holds more bytes than its
 * bound, never keep: the entry just loaded stays even when it alone is over the bound.
 */
static void make_room(struct pp_proc_cache *c, const struct node *keep)
{
	while (c->bytes > c->max_bytes) {
		struct link *lists[2] = {&c->exited, &c->live}, *victim = NULL;

		for (int i = 0; i < 2 && !victim; i++)
			for (struct link *l = lists[i]->prev; l != lists[i] && !victim; l = l->prev)
				if (l != &keep->lru)
					victim = l;
		if (!victim)
			return;
		node_remove(c, node_of_link(victim));
		c->st.evictions++;
	}
}

/* ---- negative cache ---- */

static struct neg_slot *neg_slot(struct pp_proc_cache *c, uint32_t pid)
{
	return &c->neg[hash_pid(pid, c->neg_bits)];
}

static void neg_insert(struct pp_proc_cache *c, uint32_t pid, uint64_t now)
{
	struct neg_slot *s = neg_slot(c, pid);

	if (s->used && s->pid != pid && s->expires_ns > now)
		c->st.negative_evictions++;
	s->pid = pid;
	s->used = 1;
	s->expires_ns = now + c->neg_ttl_ns;
}

static int neg_hit(struct pp_proc_cache *c, uint32_t pid, uint64_t now)
{
	struct neg_slot *s = neg_slot(c, pid);

	return s->used && s->pid == pid && s->expires_ns > now;
}

static void neg_forget(struct pp_proc_cache *c, uint32_t pid)
{
	struct neg_slot *s = neg_slot(c, pid);

	if (s->used && s->pid == pid)
		s->used = 0;
}

/* ---- reading the proc root ---- */

static int proc_file(const struct pp_proc_cache *c, uint32_t pid, const char *name, char *out,
		     size_t outlen)
{
	int n = snprintf(out, outlen, "%s/%u/%s", c->root, pid, name);

	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

/* A vanished process shows as ENOENT on open, ESRCH on read of some files. */
static int gone_errno(int err)
{
	return err == ENOENT || err == ESRCH ? -ESRCH : -err;
}

/*
 * Read up to cap bytes of a proc file into buf. *len gets the byte count. When grow is set,
 * buf is the cache's scratch buffer and grows (up to c->max_maps_bytes).
 */
static int read_proc_file(struct pp_proc_cache *c, const char *path, char **buf, size_t *cap,
			  int grow, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t used = 0;
	int err = 0;

	if (fd < 0)
		return gone_errno(errno);
	for (;;) {
		ssize_t r;

		if (used == *cap) {
			size_t ncap;
			char *nb;

			if (!grow || *cap >= c->max_maps_bytes)
				break; /* truncated: keep what fits */
			ncap = *cap ? *cap * 2 : 65536;
			if (ncap > c->max_maps_bytes)
				ncap = c->max_maps_bytes;
			nb = realloc(*buf, ncap);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			*buf = nb;
			*cap = ncap;
		}
		r = read(fd, *buf + used, *cap - used);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = gone_errno(errno);
			break;
		}
		if (r == 0)
			break;
		used += (size_t)r;
	}
	close(fd);
	*len = used;
	return err;
}

static int read_stat(struct pp_proc_cache *c, uint32_t pid, struct pp_proc_stat *st)
{
	char path[4096], stackbuf[STAT_BUF_LEN];
	char *buf = stackbuf;
	size_t cap = sizeof(stackbuf), len = 0;
	int err;

	err = proc_file(c, pid, "stat", path, sizeof(path));
	if (err)
		return err;
	err = read_proc_file(c, path, &buf, &cap, 0, &len);
	if (err)
		return err;
	/* An empty read means the task went away between open and read. */
	if (len == 0)
		return -ESRCH;
	return pp_proc_stat_parse(buf, len, st);
}

static void read_comm(struct pp_proc_cache *c, uint32_t pid, struct pp_proc *p)
{
	char path[4096], stackbuf[PP_PROC_COMM_LEN + 1];
	char *buf = stackbuf;
	size_t cap = sizeof(stackbuf) - 1, len = 0;

	if (proc_file(c, pid, "comm", path, sizeof(path)) ||
	    read_proc_file(c, path, &buf, &cap, 0, &len) || len == 0)
		return; /* keep the name from stat */
	if (buf[len - 1] == '\n')
		len--;
	if (len >= sizeof(p->comm))
		len = sizeof(p->comm) - 1;
	memcpy(p->comm, buf, len);
	p->comm[len] = '\0';
}

static int read_exe(struct pp_proc_cache *c, uint32_t pid, struct pp_proc *p)
{
	char path[4096], target[4096];
	const size_t sl = sizeof(DELETED_SUFFIX) - 1;
	ssize_t n;

	if (proc_file(c, pid, "exe", path, sizeof(path)))
		return -ENAMETOOLONG;
	n = readlink(path, target, sizeof(target));
	if (n < 0 || (size_t)n >= sizeof(target)) {
		if (n < 0 && errno == ESRCH)
			return -ESRCH;
		p->flags |= PP_PROC_F_NO_EXE;
		n = 0;
	}
	if ((size_t)n >= sl && memcmp(target + n - sl, DELETED_SUFFIX, sl) == 0) {
		p->flags |= PP_PROC_F_EXE_DELETED;
		n -= (ssize_t)sl;
	}
	target[n] = '\0';
	p->exe = strdup(target);
	return p->exe ? 0 : -ENOMEM;
}

/* Read and parse maps into *out. -ESRCH when the process is gone. */
static int read_maps(struct pp_proc_cache *c, uint32_t pid, struct pp_maps *out)
{
	char path[4096];
	size_t len = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = proc_file(c, pid, "maps", path, sizeof(path));
	if (err)
		return err;
	err = read_proc_file(c, path, &c->scratch, &c->scratch_cap, 1, &len);
	if (err)
		return err;
	err = pp_maps_parse(c->scratch, len, out);
	if (!err)
		c->st.maps_bad_lines += out->bad_lines;
	/* one huge maps file must not keep its buffer for the agent's lifetime */
	if (c->scratch_cap > SCRATCH_KEEP_BYTES) {
		free(c->scratch);
		c->scratch = NULL;
		c->scratch_cap = 0;
	}
	return err;
}

/* Read everything about pid into *p (zeroed first). On failure *p holds nothing to release. */
static int load_proc(struct pp_proc_cache *c, uint32_t pid, struct pp_proc *p, uint64_t now)
{
	struct pp_proc_stat st;
	int err;

	memset(p, 0, sizeof(*p));
	c->st.loads++;
	err = read_stat(c, pid, &st);
	if (err)
		goto out_err;
	p->pid = pid;
	p->start_time = st.start_time;
	p->relatives[0] = st.ppid;
	memcpy(p->comm, st.comm, sizeof(p->comm));
	read_comm(c, pid, p);
	if (st.flags & PF_KTHREAD_FLAG) {
		/* Kernel threads have no exe and empty maps; nothing more to read. */
		p->flags |= PP_PROC_F_KTHREAD | PP_PROC_F_NO_EXE;
		p->exe = strdup("");
		if (!p->exe) {
			err = -ENOMEM;
			goto out_err;
		}
	} else {
		err = read_exe(c, pid, p);
		if (err)
			goto out_release;
		err = read_maps(c, pid, &p->maps);
		if (err == -ESRCH || err == -ENOMEM)
			goto out_release;
		if (err)
			p->flags |= PP_PROC_F_NO_MAPS; /* keep the rest; lookups will miss */
	}
	p->loaded_ns = now;
	p->maps_loaded_ns = now;
	p->generation = ++c->generation_seq;
	return 0;

out_release:
	proc_release(p);
out_err:
	if (err == -ESRCH)
		c->st.gone++;
	else
		c->st.load_errors++;
	return err;
}

/* Replace a cached entry's contents with a fresh load (exec or pid reuse). */
static int reload_node(struct pp_proc_cache *c, struct node *n, uint64_t now)
{
	struct pp_proc fresh;
	int err = load_proc(c, n->proc.pid, &fresh, now);

	if (err)
		return err;
	if (n->proc.start_time && fresh.start_time != n->proc.start_time)
		c->st.pid_reuse++;
	proc_release(&n->proc);
	n->proc = fresh;
	touch(c, n);
	account(c, n);
	make_room(c, n);
	return 0;
}

/* ---- public API ---- */

struct pp_proc_cache *pp_proc_cache_new(const struct pp_proc_cache_opts *opts)
{
	struct pp_proc_cache *c;
	size_t neg_cap;

	if (!opts || opts->capacity == 0) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->capacity = opts->capacity;
	c->root = strdup(opts->proc_root ? opts->proc_root : DEFAULT_PROC_ROOT);
	c->bucket_bits = bits_for(opts->capacity);
	c->buckets = calloc((size_t)1 << c->bucket_bits, sizeof(c->buckets[0]));
	neg_cap = opts->negative_capacity ? opts->negative_capacity : DEFAULT_NEG_CAPACITY;
	c->neg_bits = bits_for(neg_cap);
	c->neg = calloc((size_t)1 << c->neg_bits, sizeof(c->neg[0]));
	if (!c->root || !c->buckets || !c->neg) {
		pp_proc_cache_free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->neg_ttl_ns = opts->negative_ttl_ns ? opts->negative_ttl_ns : DEFAULT_NEG_TTL_NS;
	c->reload_gap_ns =
	    opts->reload_min_gap_ns ? opts->reload_min_gap_ns : DEFAULT_RELOAD_GAP_NS;
	c->max_maps_bytes = opts->max_maps_bytes ? opts->max_maps_bytes : DEFAULT_MAX_MAPS_BYTES;
	c->max_bytes = opts->max_bytes ? opts->max_bytes : DEFAULT_MAX_BYTES;
	c->exited_ttl_ns = opts->exited_ttl_ns ? opts->exited_ttl_ns : DEFAULT_EXITED_TTL_NS;
	c->now_fn = opts->now_ns ? opts->now_ns : monotonic_ns;
	c->clock_ctx = opts->clock_ctx;
	list_init(&c->live);
	list_init(&c->exited);
	return c;
}

void pp_proc_cache_free(struct pp_proc_cache *c)
{
	if (!c)
		return;
	if (c->buckets) {
		while (c->live.next && c->live.next != &c->live)
			node_remove(c, node_of_link(c->live.next));
		while (c->exited.next && c->exited.next != &c->exited)
			node_remove(c, node_of_link(c->exited.next));
	}
	free(c->buckets);
	free(c->neg);
	free(c->scratch);
	free(c->root);
	free(c);
}

/* A new entry holding *fresh (taken over; released on failure), or NULL. */
static struct node *insert_node(struct pp_proc_cache *c, struct pp_proc *fresh)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n) {
		proc_release(fresh);
		return NULL;
	}
	if (c->count >= c->capacity)
		evict_one(c);
	n->proc = *fresh;
	n->hnext = c->buckets[hash_pid(fresh->pid, c->bucket_bits)];
	c->buckets[hash_pid(fresh->pid, c->bucket_bits)] = n;
	list_init(&n->lru);
	list_add_front(&c->live, &n->lru);
	c->count++;
	account(c, n);
	make_room(c, n);
	return n;
}

/* Samples reach us out of order by up to a poll or a window's grace: after this, none. */
#define PREV_IMAGE_NS (5 * 1000000000ull)

static const struct pp_proc *get_cached(struct pp_proc_cache *c, struct node *n, uint64_t now,
					uint64_t sample_ns)
{
	int err;

	c->st.hits++;
	if (n->proc.flags & PP_PROC_F_STALE) {
		/*
		 * A sample taken before the exec describes the old image, which the entry still
		 * holds: records of other CPUs' rings can arrive after the exec event.
		 */
		if (sample_ns && sample_ns < n->exec_ns) {
			c->st.pre_exec_hits++;
			touch(c, n);
			return &n->proc;
		}
		n->exec_ns = 0;
		err = reload_node(c, n, now);
		if (err == -ESRCH) {
			/* Exec'ed and then gone: the pre-exec contents describe nothing queued. */
			uint32_t pid = n->proc.pid;

			node_remove(c, n);
			neg_insert(c, pid, now);
			errno = ESRCH;
			return NULL;
		}
		if (err) {
			errno = -err;
			return NULL;
		}
		return &n->proc;
	}
	if ((n->proc.flags & PP_PROC_F_EXITED) && now - n->checked_ns >= c->reload_gap_ns) {
		struct pp_proc_stat st;

		n->checked_ns = now;
		/*
		 * Samples of the exited process may still be queued, so the entry is kept unless
		 * a different process now owns the pid. The side-band says so itself (a fork).
		 */
		if (!(n->proc.flags & PP_PROC_F_EVENTS) && read_stat(c, n->proc.pid, &st) == 0 &&
		    st.start_time != n->proc.start_time)
			(void)reload_node(c, n, now);
	}
	touch(c, n);
	return &n->proc;
}

const struct pp_proc *pp_proc_cache_get(struct pp_proc_cache *c, uint32_t pid)
{
	return pp_proc_cache_get_at(c, pid, 0);
}

const struct pp_proc *pp_proc_cache_get_at(struct pp_proc_cache *c, uint32_t pid,
					   uint64_t sample_ns)
{
	struct pp_proc fresh;
	struct node *n;
	uint64_t now;
	int err;

	if (!c) {
		errno = EINVAL;
		return NULL;
	}
	n = lookup(c, pid);
	if (n && n->prev && sample_ns) {
		/* a side-band entry keeps the images before an exec for samples taken before it */
		if (sample_ns < n->exec_ns) {
			struct image *img = image_at(n, sample_ns);

			touch(c, n);
			if (!img) {
				/* any image kept would be another program's: none is this one's */
				c->st.pre_image_misses++;
				errno = ESTALE;
				return NULL;
			}
			c->st.hits++;
			c->st.pre_exec_hits++;
			if (img != n->prev)
				c->st.older_image_hits++;
			return &img->proc;
		}
		if (sample_ns - n->exec_ns > PREV_IMAGE_NS) {
			drop_prev(n);
			account(c, n);
		}
	}
	/* The common case, a live cached process, needs no clock read (this runs per sample). */
	if (n && !(n->proc.flags & (PP_PROC_F_STALE | PP_PROC_F_EXITED))) {
		c->st.hits++;
		touch(c, n);
		return &n->proc;
	}
	now = now_ns(c);
	if (n)
		return get_cached(c, n, now, sample_ns);
	if (neg_hit(c, pid, now)) {
		c->st.negative_hits++;
		errno = ESRCH;
		return NULL;
	}
	c->st.misses++;
	expire_exited(c, now);
	err = load_proc(c, pid, &fresh, now);
	if (err) {
		if (err == -ESRCH)
			neg_insert(c, pid, now);
		errno = -err;
		return NULL;
	}
	n = insert_node(c, &fresh);
	if (!n) {
		errno = ENOMEM;
		return NULL;
	}
	return &n->proc;
}

static void mark_exited(struct pp_proc_cache *c, struct node *n, uint64_t now)
{
	n->proc.flags |= PP_PROC_F_EXITED;
	n->checked_ns = now;
	n->exited_ns = now;
	touch(c, n);
}

/*
 * Reread the maps of a live entry. The pid is checked first: when it is gone or belongs to a
 * new process, the entry's process has exited and keeps its last maps.
 */
static void reload_maps(struct pp_proc_cache *c, struct node *n, uint64_t now)
{
	struct pp_proc_stat st;
	struct pp_maps maps;
	int err;

	n->proc.maps_loaded_ns = now;
	err = read_stat(c, n->proc.pid, &st);
	/* a side-band entry learns its start time here; a fork would have replaced it */
	if (!err && (n->proc.flags & PP_PROC_F_EVENTS) && !n->proc.start_time)
		n->proc.start_time = st.start_time;
	if (err == -ESRCH || (!err && st.start_time != n->proc.start_time)) {
		mark_exited(c, n, now);
		return;
	}
	if (err)
		return;
	err = read_maps(c, n->proc.pid, &maps);
	if (err == -ESRCH) {
		mark_exited(c, n, now);
		return;
	}
	if (err)
		return;
	pp_maps_fini(&n->proc.maps);
	n->proc.maps = maps;
	n->proc.flags &= ~(uint32_t)PP_PROC_F_NO_MAPS;
	account(c, n);
	make_room(c, n);
}

const struct pp_map_entry *pp_proc_cache_find_map(struct pp_proc_cache *c,
						  const struct pp_proc *proc, uint64_t addr)
{
	const struct pp_map_entry *e;
	struct node *n;
	uint64_t now;

	if (!c || !proc) {
		errno = EINVAL;
		return NULL;
	}
	e = pp_maps_find(&proc->maps, addr);
	if (e)
		return e;
	if (proc->flags & PP_PROC_F_REPLACED) { /* an image before an exec: nothing to reread */
		errno = ENOENT;
		return NULL;
	}
	n = node_of_proc(proc);
	if (n->proc.flags & (PP_PROC_F_EXITED | PP_PROC_F_KTHREAD)) {
		errno = ENOENT;
		return NULL;
	}
	now = now_ns(c);
	if (now - n->proc.maps_loaded_ns < c->reload_gap_ns) {
		c->st.reloads_suppressed++;
		errno = ENOENT;
		return NULL;
	}
	c->st.reloads_for_unplaced_addr++;
	reload_maps(c, n, now);
	e = pp_maps_find(&n->proc.maps, addr);
	if (!e)
		errno = ENOENT;
	return e;
}

void pp_proc_cache_on_exec(struct pp_proc_cache *c, uint32_t pid)
{
	pp_proc_cache_on_exec_at(c, pid, 0);
}

void pp_proc_cache_on_exec_at(struct pp_proc_cache *c, uint32_t pid, uint64_t exec_ns)
{
	struct node *n;

	if (!c)
		return;
	neg_forget(c, pid);
	n = lookup(c, pid);
	if (n) {
		n->proc.flags |= PP_PROC_F_STALE;
		n->exec_ns = exec_ns;
	}
}

void pp_proc_cache_on_exit(struct pp_proc_cache *c, uint32_t pid)
{
	struct node *n;

	if (!c)
		return;
	n = lookup(c, pid);
	if (n && !(n->proc.flags & PP_PROC_F_EXITED))
		mark_exited(c, n, now_ns(c));
}

void pp_proc_cache_on_fork(struct pp_proc_cache *c, uint32_t pid)
{
	struct node *n;

	if (!c)
		return;
	neg_forget(c, pid);
	n = lookup(c, pid);
	if (n) {
		/* Whatever was cached under this pid is a previous process. */
		n->proc.flags |= PP_PROC_F_STALE;
		n->exec_ns = 0; /* not an exec: reloaded whatever a sample's time */
		if (!(n->proc.flags & PP_PROC_F_EXITED))
			mark_exited(c, n, now_ns(c));
	}
}

/* A side-band image: pid, comm and maps given, exe to come from its first mapping. */
static int sb_image(struct pp_proc_cache *c, struct pp_proc *p, uint32_t pid, const char *comm,
		    uint64_t now)
{
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->flags = PP_PROC_F_EVENTS;
	snprintf(p->comm, sizeof(p->comm), "%s", comm);
	p->exe = strdup("");
	if (!p->exe)
		return -ENOMEM;
	p->loaded_ns = now;
	p->maps_loaded_ns = now;
	p->generation = ++c->generation_seq;
	return 0;
}

/* Make *fresh the image of pid from born_ns on, the one before kept when keep_prev. */
static void sb_replace(struct pp_proc_cache *c, uint32_t pid, struct pp_proc *fresh,
		       uint64_t born_ns, int keep_prev)
{
	struct node *n = lookup(c, pid);
	struct image *img;

	c->st.sb_images++;
	if (!n) {
		n = insert_node(c, fresh);
		if (n)
			n->born_ns = born_ns;
		return;
	}
	/* a stale image (read from /proc when sampled) describes nothing a sample could use */
	img = keep_prev && !(n->proc.flags & (PP_PROC_F_EXITED | PP_PROC_F_STALE))
		  ? malloc(sizeof(*img))
		  : NULL;
	if (img) {
		struct image **link = &n->prev;

		img->proc = n->proc;
		img->proc.flags |= PP_PROC_F_REPLACED;
		img->born_ns = n->born_ns;
		img->older = n->prev;
		n->prev = img;
		memset(&n->proc, 0, sizeof(n->proc));
		/* the oldest go: a chain longer than a wrapper's is not one exec's */
		for (int kept = 1; *link && kept < PREV_IMAGES_MAX; kept++)
			link = &(*link)->older;
		if (*link)
			drop_images(&(*link)->older);
	} else {
		drop_prev(n);
	}
	proc_release(&n->proc);
	n->proc = *fresh;
	n->exec_ns = born_ns;
	n->born_ns = born_ns;
	n->exited_ns = 0;
	touch(c, n);
	account(c, n);
	make_room(c, n);
}

void pp_proc_cache_on_sb_exec(struct pp_proc_cache *c, uint32_t pid, const char *comm,
			      uint64_t time_ns)
{
	struct pp_proc fresh;
	struct node *n;
	uint64_t now;

	if (!c || !comm)
		return;
	now = now_ns(c);
	neg_forget(c, pid);
	expire_exited(c, now);
	n = lookup(c, pid);
	if (n && n->born_ns > time_ns) /* a late record: the entry is newer */
		return;
	if (sb_image(c, &fresh, pid, comm, now))
		return;
	if (n) /* an exec keeps the process, and where it came from */
		memcpy(fresh.relatives, n->proc.relatives, sizeof(fresh.relatives));
	sb_replace(c, pid, &fresh, time_ns, 1);
}

void pp_proc_cache_on_sb_fork(struct pp_proc_cache *c, uint32_t pid, uint32_t ppid,
			      uint64_t time_ns)
{
	struct pp_proc fresh;
	struct node *parent, *n;
	uint64_t now;

	if (!c || pid == ppid)
		return;
	now = now_ns(c);
	neg_forget(c, pid);
	n = lookup(c, pid);
	if (n && n->born_ns > time_ns)
		return;
	expire_exited(c, now);
	parent = lookup(c, ppid);
	if (!parent && ppid > 2) {
		/*
		 * A parent older than the agent (a shell, a service): read once, now that it
		 * forks, so that its children are known even when they exit before a sample is
		 * read (pid 2 is kthreadd: its children are kernel threads).
		 */
		const struct pp_proc *pp = pp_proc_cache_get(c, ppid);

		if (pp && !(pp->flags & PP_PROC_F_REPLACED))
			parent = node_of_proc(pp);
	}
	if (!parent || (parent->proc.flags & PP_PROC_F_KTHREAD)) {
		/*
		 * Nothing to inherit from: the child is read from /proc when sampled (a stale
		 * image), unless it execs first; either way it knows where it came from.
		 */
		if (sb_image(c, &fresh, pid, "", now))
			return;
		fresh.flags |= PP_PROC_F_STALE;
		fresh.relatives[0] = ppid;
		sb_replace(c, pid, &fresh, time_ns, 0);
		return;
	}
	if (sb_image(c, &fresh, pid, parent->proc.comm, now))
		return;
	/* the child starts with its parent's image, mappings and all */
	free(fresh.exe);
	fresh.exe = strdup(parent->proc.exe ? parent->proc.exe : "");
	if (!fresh.exe || pp_maps_copy(&fresh.maps, &parent->proc.maps)) {
		proc_release(&fresh);
		return;
	}
	fresh.flags |= parent->proc.flags & PP_PROC_F_EXE_DELETED;
	fresh.relatives[0] = ppid;
	fresh.relatives[1] = parent->proc.relatives[0];
	sb_replace(c, pid, &fresh, time_ns, 0);
}

const struct pp_proc *pp_proc_cache_peek(struct pp_proc_cache *c, uint32_t pid)
{
	struct node *n = c ? lookup(c, pid) : NULL;

	return n ? &n->proc : NULL;
}

const struct pp_proc *pp_proc_cache_image_before(struct pp_proc_cache *c,
						 const struct pp_proc *proc)
{
	const struct node *n;

	if (!c || !proc || (proc->flags & PP_PROC_F_REPLACED))
		return NULL;
	n = node_of_proc(proc);
	return n->prev ? &n->prev->proc : NULL;
}

void pp_proc_cache_on_sb_comm(struct pp_proc_cache *c, uint32_t pid, const char *comm)
{
	struct node *n = c && comm ? lookup(c, pid) : NULL;

	if (n)
		snprintf(n->proc.comm, sizeof(n->proc.comm), "%s", comm);
}

void pp_proc_cache_on_sb_mmap(struct pp_proc_cache *c, uint32_t pid, uint64_t time_ns,
			      const struct pp_map_entry *e)
{
	struct node *n = c && e ? lookup(c, pid) : NULL;
	struct pp_proc *p = n ? &n->proc : NULL;

	if (n && time_ns < n->born_ns) {
		/*
		 * Made before the exec that replaced its image: one CPU's record read after
		 * another CPU's exec, in the next read of the rings. It belongs to that image.
		 */
		struct image *img = image_at(n, time_ns);

		p = img ? &img->proc : NULL;
		if (p)
			c->st.sb_mmaps_late++;
	}
	if (!p || (p->flags & PP_PROC_F_EXITED)) {
		if (c)
			c->st.sb_mmaps_unused++;
		return;
	}
	if (pp_maps_insert(&p->maps, e))
		return;
	c->st.sb_mmaps++;
	if (e->perms & PP_MAP_EXEC)
		p->maps_version++;
	/* an exec'd image's first file mapping is its executable (or a script's interpreter) */
	if ((p->flags & PP_PROC_F_EVENTS) && p->exe && !p->exe[0] && e->kind == PP_MAP_KIND_FILE) {
		char *exe = strdup(e->path);

		if (exe) {
			free(p->exe);
			p->exe = exe;
			if (e->deleted)
				p->flags |= PP_PROC_F_EXE_DELETED;
		}
	}
	account(c, n);
	make_room(c, n);
}

void pp_proc_cache_get_stats(const struct pp_proc_cache *c, struct pp_proc_cache_stats *out)
{
	if (!out)
		return;
	if (!c) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = c->st;
}

size_t pp_proc_cache_bytes(const struct pp_proc_cache *c)
{
	return c ? c->bytes : 0;
}

size_t pp_proc_cache_buffer_bytes(const struct pp_proc_cache *c)
{
	return c ? c->scratch_cap : 0;
}

size_t pp_proc_cache_count(const struct pp_proc_cache *c)
{
	return c ? c->count : 0;
}

int pp_proc_path_in_root(const char *proc_root, uint32_t pid, const char *path, char *out,
			 size_t outlen)
{
	int n;

	if (!path || path[0] != '/' || !out || outlen == 0)
		return -EINVAL;
	n = snprintf(out, outlen, "%s/%u/root%s", proc_root ? proc_root : DEFAULT_PROC_ROOT, pid,
		     path);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= outlen) {
		out[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

/* ---- /proc/PID/stat ---- */

static int parse_u64_field(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint64_t d;

		if (s[i] < '0' || s[i] > '9')
			return -1;
		d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int pp_proc_stat_parse(const char *buf, size_t len, struct pp_proc_stat *out)
{
	const char *open, *close = NULL, *p, *end = buf + len;
	uint64_t v;
	size_t n;
	int field;

	if (!buf || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	open = memchr(buf, '(', len);
	if (!open)
		return -EINVAL;
	for (p = end; p > open + 1;) {
		p--;
		if (*p == ')') {
			close = p;
			break;
		}
	}
	if (!close)
		return -EINVAL;
	n = (size_t)(close - open - 1);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	out->comm[n] = '\0';

	/* Fields after the comm, numbered as in proc(5): state is field 3. */
	p = close + 1;
	for (field = 3; field <= 22; field++) {
		const char *tok;

		while (p < end && *p == ' ')
			p++;
		tok = p;
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		n = (size_t)(p - tok);
		if (n == 0)
			return -EINVAL;
		switch (field) {
		case 3:
			if (n != 1)
				return -EINVAL;
			out->state = tok[0];
			break;
		case 4:
			if (parse_u64_field(tok, n, &v) || v > UINT32_MAX)
				return -EINVAL;
			out->ppid = (uint32_t)v;
			break;
		case 9:
			if (parse_u64_field(tok, n, &v) || v > UINT32_MAX)
				return -EINVAL;
			out->flags = (uint32_t)v;
			break;
		case 22:
			if (parse_u64_field(tok, n, &v))
				return -EINVAL;
			out->start_time = v;
			break;
		default:
			break;
		}
	}
	return 0;
}

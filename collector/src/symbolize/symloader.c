/*
 * The symbol loader's worker and its two queues (symloader.h): requests in, in arrival order,
 * bounded; results out, one per request. One mutex guards both and the stats copy; the cache
 * is the worker's alone.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "symloader.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/vec.h"
#include "kernel_module.h"
#include "process/mapped_file.h"

enum req_kind {
	REQ_MAPPING,
	REQ_DEBUG,
	REQ_FORGET,
	REQ_DATA_TYPE,
	REQ_KERNEL_DATA_TYPE,
	REQ_KMOD_DATA_TYPE,
};

/* While debuginfod fetches the kernel's image, its search (a few opens) runs this often. */
#define KERNEL_IMAGE_RETRY_NS 1000000000ull
/*
 * Tables read (built or from the store) since the loader last handed its arena's free memory
 * back: below this, what a read leaves behind is reused by the next, and a trim (madvise over
 * every arena, a TLB shootdown on each CPU) would cost more than it returns.
 */
#define TRIM_AFTER_READ_BYTES (4u << 20)

struct request {
	enum req_kind kind;
	uint64_t tag;
	uint32_t pid;
	uint32_t relatives[PP_PROC_RELATIVES]; /* whose roots to look in when pid is gone */
	struct pp_map_entry map;	       /* path points at path below */
	char *path;
	char build_id[PP_BUILD_ID_HEX_SIZE];
	/*
	 * REQ_DATA_TYPE: the instruction's; REQ_KERNEL_DATA_TYPE: its offset from _stext;
	 * REQ_KMOD_DATA_TYPE: its address (path: the module's name)
	 */
	uint64_t file_offset;
	/* REQ_KMOD_DATA_TYPE: the module's symbol around it, where kallsyms puts it */
	char *symbol;
	uint64_t symbol_addr;
};

/* A kernel module's files laid out, or why it has none; the worker's. */
struct kmod_entry {
	char name[PP_KMOD_NAME_MAX]; /* "" : a free entry */
	struct pp_kmod_image img;    /* laid out when r is made */
	struct pp_data_type_resolver *r;
	int err;	   /* 0, or the -errno of its search */
	uint64_t retry_ns; /* a failed search is run again then */
	uint64_t used;	   /* least recently used replaced */
	uint32_t answers;  /* r made again after opts' type_answers */
};

/* A data-type resolver of a file, kept by the file's identity; the worker's. */
struct type_file {
	dev_t dev;
	ino_t ino;
	int fd, dwarf_fd; /* dwarf_fd: the debug file's, or fd */
	struct pp_data_type_resolver *r;
	uint64_t used;	  /* for least-recently-used replacement */
	int too_big;	  /* its debug file's DWARF is over the budget: r has none */
	uint32_t answers; /* made again after PP_SYMLOADER_DATA_TYPE_ANSWERS */
};

struct pp_symloader {
	struct pp_symloader_opts opts;
	char proc_root[256];
	struct pp_symcache *cache;     /* the worker's */
	struct pp_symbol_store *store; /* the worker's, through cache */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t work;	/* a request came, or stop */
	pthread_cond_t changed; /* a result came, or the worker went idle */
	bool stop, busy;
	struct request *q; /* ring of max_queued */
	size_t q_head, q_len;
	/* of q_len, those the worker may take: all, or those queued before a kick */
	size_t q_woken;
	struct pp_symload_result *res;
	size_t res_n, res_cap;
	atomic_size_t ready; /* res_n, for pp_symloader_ready without the lock */
	struct type_file types[PP_SYMLOADER_DATA_TYPE_FILES]; /* the worker's */
	uint64_t types_clock;
	uint64_t type_bytes;   /* opts.max_type_bytes, or the default */
	uint32_t type_answers; /* opts.type_answers, or the default */
	/* the kernel's image and its resolver, the worker's; why under lock */
	struct pp_kernel_image kimage;
	struct pp_data_type_resolver *kernel_r;
	uint32_t kernel_answers;
	uint64_t kernel_retry_ns; /* while debuginfod fetches the image: its next search */
	char kernel_why[768];	  /* the image's path, its build id and words */
	struct kmod_entry kmods[PP_SYMLOADER_KERNEL_MODULES];
	uint64_t kmods_clock;
	uint32_t kmods_typed, kmods_untyped; /* under lock */
	char kmod_why[768];		     /* the last failed module search; under lock */
	struct pp_symloader_stats st;	     /* under lock */
};

static void request_fini(struct request *r)
{
	free(r->path);
	free(r->symbol);
	r->path = NULL;
	r->symbol = NULL;
}

/* Queue r (its path taken over); -ENOSPC when full. Under the lock. */
static int enqueue(struct pp_symloader *l, struct request *r)
{
	if (l->q_len == l->opts.max_queued)
		return -ENOSPC;
	l->q[(l->q_head + l->q_len) % l->opts.max_queued] = *r;
	l->q_len++;
	/* else pp_symloader_kick, once for the caller's batch */
	if (!l->opts.kick_by_caller) {
		l->q_woken++;
		pthread_cond_signal(&l->work);
	}
	return 0;
}

static int post(struct pp_symloader *l, const struct pp_symload_result *r)
{
	int err = pp_vec_reserve((void **)&l->res, &l->res_cap, l->res_n, sizeof(*l->res), 64, 0);

	if (err)
		return err;
	l->res[l->res_n++] = *r;
	atomic_store_explicit(&l->ready, l->res_n, memory_order_release);
	pthread_cond_broadcast(&l->changed);
	return 0;
}

/* A mapping's table: opened the safe way, read through the cache. */
static void load_mapping(struct pp_symloader *l, const struct request *rq,
			 struct pp_symload_result *out, enum pp_mapped_via *via)
{
	const struct pp_elf_symbols *syms;
	char root[300];
	struct pp_file_identity id;
	bool named = pp_mapped_file_identity(&rq->map, &id);
	uint32_t root_pid;
	int fd;

	/* a file the mapping named as a get found it lately: no open */
	if (named) {
		syms = pp_symcache_get_identity(l->cache, &id);
		if (syms) {
			*via = PP_MAPPED_VIA_IDENTITY;
			out->syms = pp_elf_symbols_ref((struct pp_elf_symbols *)syms);
			return;
		}
	}
	fd = pp_mapped_file_open_gone(l->proc_root, rq->pid, rq->relatives, PP_PROC_RELATIVES,
				      &rq->map, via, &root_pid);
	if (fd < 0) {
		out->err = -fd;
		return;
	}
	snprintf(root, sizeof(root), "%s/%u/root", l->proc_root, root_pid);
	syms = pp_symcache_get_fd(l->cache, fd, root, rq->map.path, NULL);
	out->err = syms ? 0 : errno;
	if (syms && named)
		pp_symcache_add_identity(l->cache, &id, fd);
	/* the cache may evict it at the next get: the taker holds its own reference */
	out->syms = pp_elf_symbols_ref((struct pp_elf_symbols *)syms);
	close(fd);
}

/* A debug file fetched by build id, for naming frames that went out unnamed. */
static void load_debug(struct pp_symloader *l, const struct request *rq,
		       struct pp_symload_result *out)
{
	int fd = l->opts.debug_fetch ? l->opts.debug_fetch(l->opts.debug_fetch_ctx, rq->build_id)
				     : -ENOENT;

	snprintf(out->build_id, sizeof(out->build_id), "%s", rq->build_id);
	if (fd < 0) {
		out->err = -fd;
		return;
	}
	out->syms = pp_elf_symbols_open_fd_limited(fd, 0, l->opts.max_bytes);
	out->err = out->syms ? 0 : errno;
	close(fd);
}

static void type_file_clear(struct type_file *t)
{
	pp_data_type_resolver_free(t->r);
	if (t->dwarf_fd >= 0 && t->dwarf_fd != t->fd)
		close(t->dwarf_fd);
	if (t->fd >= 0)
		close(t->fd);
	*t = (struct type_file){.fd = -1, .dwarf_fd = -1};
}

/* The separate debug file of the binary open at fd, found as symbolization finds it. */
static int type_debug_file(struct pp_symloader *l, int fd, const char *root, const char *path)
{
	const struct pp_elf_symbols *syms = pp_symcache_get_fd(l->cache, fd, root, path, NULL);
	enum pp_symbol_source src;

	return syms ? pp_symcache_open_debug_file(l->cache, syms, root, path, &src) : -ENOENT;
}

static uint64_t types_bytes(const struct pp_symloader *l)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < PP_SYMLOADER_DATA_TYPE_FILES; i++)
		if (l->types[i].r)
			sum += pp_data_type_dwarf_bytes(l->types[i].r);
	return sum;
}

/*
 * A resolver of code_fd with the DWARF in dwarf_fd, within the bytes the kept ones leave of
 * PP_SYMLOADER_DATA_TYPE_BYTES: the least recently used others are let go to make room (keep:
 * the slot being filled, spared). NULL with errno; EFBIG when the file's DWARF alone is over.
 */
static struct pp_data_type_resolver *budgeted(struct pp_symloader *l, int code_fd, int dwarf_fd,
					      const struct type_file *keep)
{
	for (;;) {
		uint64_t used = types_bytes(l);
		struct pp_data_type_opts o = {.max_dwarf_bytes =
						  l->type_bytes > used ? l->type_bytes - used : 1};
		struct pp_data_type_resolver *r = pp_data_type_resolver_open(code_fd, dwarf_fd, &o);
		struct type_file *lru = NULL;

		if (r || errno != EFBIG)
			return r;
		for (size_t i = 0; i < PP_SYMLOADER_DATA_TYPE_FILES; i++) {
			struct type_file *t = &l->types[i];

			if (t->r && t != keep && (!lru || t->used < lru->used))
				lru = t;
		}
		if (!lru) {
			errno = EFBIG;
			return NULL;
		}
		type_file_clear(lru);
	}
}

/*
 * The kept resolver of the file open at fd (taken over), or one made now: NULL with errno
 * (EFBIG: its DWARF is over the budget).
 */
static struct type_file *type_resolver(struct pp_symloader *l, int fd, const char *root,
				       const char *path)
{
	struct type_file *slot = &l->types[0];
	struct stat st;

	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	for (size_t i = 0; i < PP_SYMLOADER_DATA_TYPE_FILES; i++) {
		struct type_file *t = &l->types[i];

		if (t->r && t->dev == st.st_dev && t->ino == st.st_ino) {
			close(fd);
			t->used = ++l->types_clock;
			return t;
		}
		if (!t->r || t->used < slot->used)
			slot = t;
	}
	type_file_clear(slot);
	slot->fd = slot->dwarf_fd = fd;
	slot->r = budgeted(l, fd, fd, slot);
	if (slot->r && !pp_data_type_has_dwarf(slot->r)) {
		int dfd = type_debug_file(l, fd, root, path);
		struct pp_data_type_resolver *with_debug =
		    dfd >= 0 ? budgeted(l, fd, dfd, slot) : NULL;

		if (with_debug) {
			pp_data_type_resolver_free(slot->r);
			slot->r = with_debug;
			slot->dwarf_fd = dfd;
		} else if (dfd >= 0) {
			slot->too_big = errno == EFBIG;
			close(dfd);
		}
	}
	if (!slot->r) {
		int err = errno ? errno : EINVAL;

		type_file_clear(slot);
		errno = err;
		return NULL;
	}
	slot->dev = st.st_dev;
	slot->ino = st.st_ino;
	slot->used = ++l->types_clock;
	return slot;
}

/* The data type an instruction of a mapping's file accesses. */
static void load_data_type(struct pp_symloader *l, const struct request *rq,
			   struct pp_symload_result *out)
{
	enum pp_mapped_via via;
	struct type_file *t;
	uint32_t root_pid;
	uint64_t vaddr;
	char root[300];
	int fd = pp_mapped_file_open_gone(l->proc_root, rq->pid, rq->relatives, PP_PROC_RELATIVES,
					  &rq->map, &via, &root_pid);

	out->type_miss = PP_DT_NO_FILE;
	if (fd < 0) {
		out->err = -fd;
		return;
	}
	snprintf(root, sizeof(root), "%s/%u/root", l->proc_root, root_pid);
	t = type_resolver(l, fd, root, rq->map.path);
	if (!t) {
		out->err = errno ? errno : EINVAL;
		if (out->err == EFBIG)
			out->type_miss = PP_DT_TOO_BIG;
		return;
	}
	if (pp_data_type_file_vaddr(t->r, rq->file_offset, &vaddr))
		out->type_miss = PP_DT_NO_CODE;
	else if (t->too_big)
		out->type_miss = PP_DT_TOO_BIG;
	else
		out->type_miss = pp_data_type_resolve(t->r, vaddr, 0, &out->type);
	if (++t->answers >= l->type_answers)
		type_file_clear(t); /* what libdw holds for it starts over at its next request */
}

/*
 * The data type a kernel instruction accesses, from the running kernel's image: looked for
 * once, at the first such request, since a vmlinux is hundreds of MiB a node rarely has.
 */
static void load_kernel_data_type(struct pp_symloader *l, const struct request *rq,
				  struct pp_symload_result *out)
{
	/* the host's, root's: mapped, its 200 MiB of DWARF page cache, not heap */
	const struct pp_data_type_opts mapped = {.flags = PP_DATA_TYPE_MAPPED};

	out->type_miss = PP_DT_NO_FILE;
	if (!l->opts.kernel_image) {
		out->err = EOPNOTSUPP;
		return;
	}
	if (!l->st.kernel_image || (l->st.kernel_image == -EINPROGRESS &&
				    pp_clock_ns(CLOCK_MONOTONIC) >= l->kernel_retry_ns)) {
		char why[sizeof(l->kernel_why)];
		int err = pp_kernel_image_open(l->opts.kernel_image, &l->kimage, why, sizeof(why));

		if (!err) {
			l->kernel_r =
			    pp_data_type_resolver_open(l->kimage.fd, l->kimage.fd, &mapped);
			if (!l->kernel_r) {
				err = errno ? -errno : -EINVAL;
				snprintf(why, sizeof(why), "%s: its ELF or DWARF cannot be read",
					 l->kimage.path);
			} else {
				snprintf(why, sizeof(why), "%s (build id %s)", l->kimage.path,
					 l->kimage.build_id);
			}
		}
		if (err == -EINPROGRESS)
			l->kernel_retry_ns = pp_clock_ns(CLOCK_MONOTONIC) + KERNEL_IMAGE_RETRY_NS;
		pthread_mutex_lock(&l->lock);
		l->st.kernel_image = err ? err : 1;
		memcpy(l->kernel_why, why, sizeof(why));
		pthread_mutex_unlock(&l->lock);
	} else if (!l->kernel_r && l->st.kernel_image > 0) {
		/* made again after its answers (PP_SYMLOADER_DATA_TYPE_ANSWERS) */
		l->kernel_r = pp_data_type_resolver_open(l->kimage.fd, l->kimage.fd, &mapped);
	}
	if (!l->kernel_r) {
		out->err = l->st.kernel_image == -EINPROGRESS ? EINPROGRESS : ENOENT;
		return;
	}
	out->type_miss =
	    pp_data_type_resolve(l->kernel_r, l->kimage.stext + rq->file_offset, 0, &out->type);
	if (++l->kernel_answers >= l->type_answers) {
		pp_data_type_resolver_free(l->kernel_r);
		l->kernel_r = NULL;
		l->kernel_answers = 0;
	}
}

static void kmod_entry_clear(struct kmod_entry *e)
{
	pp_data_type_resolver_free(e->r);
	pp_kmod_image_fini(&e->img);
	memset(e, 0, sizeof(*e));
}

/*
 * Module name's entry, searched for (again) where it has none, its search is due, or it was
 * loaded elsewhere since (its .text moved, or, placed by an anchor, ip is outside what was).
 */
static struct kmod_entry *kmod_entry(struct pp_symloader *l, const char *name,
				     const struct pp_kmod_anchor *anchor, uint64_t ip)
{
	struct kmod_entry *e = NULL, *victim = &l->kmods[0];
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC), text;
	char why[sizeof(l->kmod_why)];

	for (size_t i = 0; i < PP_SYMLOADER_KERNEL_MODULES; i++) {
		if (!strcmp(l->kmods[i].name, name))
			e = &l->kmods[i];
		if (l->kmods[i].used < victim->used)
			victim = &l->kmods[i];
	}
	/* unloaded and loaded again elsewhere: its layout is another */
	if (e && !e->err && e->img.anchored &&
	    (ip < e->img.anchored_lo || ip >= e->img.anchored_hi))
		kmod_entry_clear(e);
	else if (e && !e->err && !e->img.anchored &&
		 (pp_kmod_text_addr(l->opts.kernel_image->sys_root, name, &text) ||
		  text != e->img.text_addr))
		kmod_entry_clear(e);
	else if (e && e->err && now >= e->retry_ns)
		kmod_entry_clear(e);
	else if (e) {
		e->used = ++l->kmods_clock;
		return e;
	}
	e = victim;
	kmod_entry_clear(e);
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->used = ++l->kmods_clock;
	e->err = pp_kmod_image_open(l->opts.kernel_image, name, anchor, l->type_bytes, &e->img, why,
				    sizeof(why));
	if (e->err) {
		e->retry_ns =
		    now + (e->err == -EINPROGRESS ? KERNEL_IMAGE_RETRY_NS
						  : PP_SYMLOADER_KMOD_RETRY_S * 1000000000ull);
	}
	pthread_mutex_lock(&l->lock);
	if (e->err && e->err != -EINPROGRESS) {
		l->kmods_untyped++;
		memcpy(l->kmod_why, why, sizeof(why));
	} else if (!e->err) {
		l->kmods_typed++;
	}
	pthread_mutex_unlock(&l->lock);
	return e;
}

/* The data type a module's instruction accesses, from its files laid out (kernel_module.h). */
static void load_kmod_data_type(struct pp_symloader *l, const struct request *rq,
				struct pp_symload_result *out)
{
	struct kmod_entry *e;

	out->type_miss = PP_DT_KERNEL_MODULE;
	if (!l->opts.kernel_image || !rq->path) {
		out->err = EOPNOTSUPP;
		return;
	}
	e = kmod_entry(l, rq->path,
		       &(struct pp_kmod_anchor){.symbol = rq->symbol, .addr = rq->symbol_addr},
		       rq->file_offset);
	if (e->err) {
		out->err = e->err == -EINPROGRESS ? EINPROGRESS : -e->err;
		return;
	}
	if (!e->r) {
		e->r = pp_data_type_resolver_open_mem(
		    e->img.code, e->img.code_len, e->img.dwarf == e->img.code ? NULL : e->img.dwarf,
		    e->img.dwarf_len, NULL);
		if (!e->r) {
			out->err = errno ? errno : EINVAL;
			return;
		}
	}
	out->type_miss = pp_data_type_resolve(e->r, rq->file_offset, 0, &out->type);
	if (++e->answers >= l->type_answers) {
		pp_data_type_resolver_free(e->r);
		e->r = NULL;
		e->answers = 0;
	}
}

static void *worker_main(void *arg)
{
	struct pp_symloader *l = arg;
	uint64_t read_since_trim = 0;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		struct pp_symload_result out = {0};
		enum pp_mapped_via via = PP_MAPPED_VIA_NONE;
		struct request rq;

		while (!l->stop && l->q_woken == 0) {
			l->busy = false;
			pthread_cond_broadcast(&l->changed);
			/*
			 * Reading a large file's tables takes memory the table does not keep (the
			 * strings as read, a sort's buffer): this thread's malloc arena holds on
			 * to it unless handed back, once the queue is empty.
			 */
			if (read_since_trim > TRIM_AFTER_READ_BYTES) {
				read_since_trim = 0;
				pthread_mutex_unlock(&l->lock);
				malloc_trim(0);
				pthread_mutex_lock(&l->lock);
				continue;
			}
			pthread_cond_wait(&l->work, &l->lock);
		}
		if (l->stop)
			break;
		rq = l->q[l->q_head];
		l->q_head = (l->q_head + 1) % l->opts.max_queued;
		l->q_len--;
		l->q_woken--;
		l->busy = true;
		pthread_mutex_unlock(&l->lock);

		out.tag = rq.tag;
		if (rq.kind == REQ_MAPPING) {
			out.kind = PP_SYMLOAD_MAPPING;
			struct pp_symcache_stats before, after;

			pp_symcache_get_stats(l->cache, &before);
			load_mapping(l, &rq, &out, &via);
			pp_symcache_get_stats(l->cache, &after);
			if (out.syms && after.opens != before.opens)
				read_since_trim += pp_elf_symbols_bytes(out.syms);
		} else if (rq.kind == REQ_DEBUG) {
			out.kind = PP_SYMLOAD_DEBUG;
			load_debug(l, &rq, &out);
		} else if (rq.kind == REQ_DATA_TYPE) {
			out.kind = PP_SYMLOAD_DATA_TYPE;
			load_data_type(l, &rq, &out);
		} else if (rq.kind == REQ_KMOD_DATA_TYPE) {
			out.kind = PP_SYMLOAD_DATA_TYPE;
			load_kmod_data_type(l, &rq, &out);
		} else if (rq.kind == REQ_KERNEL_DATA_TYPE) {
			out.kind = PP_SYMLOAD_DATA_TYPE;
			load_kernel_data_type(l, &rq, &out);
		} else {
			pp_symcache_forget_build_id(l->cache, rq.build_id);
		}
		request_fini(&rq);

		pthread_mutex_lock(&l->lock);
		if (rq.kind != REQ_FORGET && post(l, &out) != 0)
			pp_elf_symbols_free(out.syms); /* out of memory: the caller asks again */
		if (rq.kind == REQ_MAPPING) {
			l->st.via_map_files += via == PP_MAPPED_VIA_MAP_FILES;
			l->st.via_root += via == PP_MAPPED_VIA_ROOT;
			l->st.via_relative += via == PP_MAPPED_VIA_RELATIVE;
			l->st.via_identity += via == PP_MAPPED_VIA_IDENTITY;
			l->st.not_the_mapped_file += via == PP_MAPPED_VIA_NONE && out.err == ESTALE;
			l->st.open_failed += via == PP_MAPPED_VIA_NONE && out.err != ESTALE;
		}
		l->st.debug_loads += rq.kind == REQ_DEBUG && out.syms;
		l->st.data_types += rq.kind == REQ_DATA_TYPE || rq.kind == REQ_KERNEL_DATA_TYPE ||
				    rq.kind == REQ_KMOD_DATA_TYPE;
		pp_symcache_get_stats(l->cache, &l->st.cache);
		pp_symbol_store_get_stats(l->store, &l->st.store);
		l->st.cache_files = pp_symcache_size(l->cache);
		l->st.cache_bytes = pp_symcache_bytes(l->cache);
	}
	l->busy = false;
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

struct pp_symloader *pp_symloader_new(const struct pp_symloader_opts *opts)
{
	struct pp_symloader *l = calloc(1, sizeof(*l));
	int err = ENOMEM;

	if (!l)
		goto fail;
	l->opts = *opts;
	for (size_t i = 0; i < PP_SYMLOADER_DATA_TYPE_FILES; i++)
		l->types[i] = (struct type_file){.fd = -1, .dwarf_fd = -1};
	l->kimage.fd = -1;
	l->type_bytes = opts->max_type_bytes ? opts->max_type_bytes : PP_SYMLOADER_DATA_TYPE_BYTES;
	l->type_answers = opts->type_answers ? opts->type_answers : PP_SYMLOADER_DATA_TYPE_ANSWERS;
	if (!l->opts.max_queued)
		l->opts.max_queued = PP_SYMLOADER_QUEUE_DEFAULT;
	snprintf(l->proc_root, sizeof(l->proc_root), "%s",
		 opts->proc_root ? opts->proc_root : "/proc");
	l->cache = pp_symcache_new(opts->max_files, opts->max_bytes);
	if (!l->cache) {
		err = errno;
		goto fail;
	}
	pp_symcache_set_debug_dirs(l->cache, opts->debug_dirs);
	pp_symcache_set_debug_fetch(l->cache, opts->debug_fetch, opts->debug_fetch_ctx);
	pp_symcache_set_open_flags(l->cache, opts->open_flags);
	if (opts->store_dir && !opts->open_flags) {
		l->store = pp_symbol_store_new(&(struct pp_symbol_store_opts){
		    .dir = opts->store_dir, .max_bytes = opts->store_bytes});
		/* without it symbols are read at each start: the caller says so (store_err) */
		l->st.store_err = l->store ? 0 : -errno;
		pp_symcache_set_store(l->cache, l->store);
		l->st.store_on = l->store != NULL;
	}
	l->q = calloc(l->opts.max_queued, sizeof(*l->q));
	if (!l->q)
		goto fail;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->work, NULL);
	{
		pthread_condattr_t ca;

		/* timed waits on the monotonic clock: a clock change must not stretch them */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&l->changed, &ca);
		pthread_condattr_destroy(&ca);
	}
	err = pthread_create(&l->thread, NULL, worker_main, l);
	if (err) {
		pthread_cond_destroy(&l->work);
		pthread_cond_destroy(&l->changed);
		pthread_mutex_destroy(&l->lock);
		goto fail;
	}
	pthread_setname_np(l->thread, "pp-symloader"); /* top -H, perf: which thread */
	l->started = true;
	return l;
fail:
	if (l) {
		pp_symcache_free(l->cache);
		pp_symbol_store_free(l->store);
		free(l->q);
		free(l);
	}
	errno = err;
	return NULL;
}

void pp_symloader_free(struct pp_symloader *l)
{
	if (!l)
		return;
	if (l->started) {
		pthread_mutex_lock(&l->lock);
		l->stop = true;
		pthread_cond_signal(&l->work);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->thread, NULL);
		pthread_cond_destroy(&l->work);
		pthread_cond_destroy(&l->changed);
		pthread_mutex_destroy(&l->lock);
	}
	for (size_t i = 0; i < l->q_len; i++)
		request_fini(&l->q[(l->q_head + i) % l->opts.max_queued]);
	for (size_t i = 0; i < l->res_n; i++)
		pp_elf_symbols_free(l->res[i].syms);
	free(l->res);
	free(l->q);
	for (size_t i = 0; i < PP_SYMLOADER_DATA_TYPE_FILES; i++)
		type_file_clear(&l->types[i]);
	pp_data_type_resolver_free(l->kernel_r);
	for (size_t i = 0; i < PP_SYMLOADER_KERNEL_MODULES; i++)
		kmod_entry_clear(&l->kmods[i]);
	if (l->kimage.fd >= 0)
		close(l->kimage.fd);
	pp_symcache_free(l->cache);
	pp_symbol_store_free(l->store);
	free(l);
}

static int submit(struct pp_symloader *l, struct request *r)
{
	int err;

	pthread_mutex_lock(&l->lock);
	err = enqueue(l, r);
	if (r->kind == REQ_MAPPING) {
		l->st.requests += !err;
		l->st.queue_full += err == -ENOSPC;
	}
	pthread_mutex_unlock(&l->lock);
	if (err)
		request_fini(r);
	return err;
}

static int submit_mapping(struct pp_symloader *l, enum req_kind kind, uint64_t tag, uint32_t pid,
			  const uint32_t *relatives, const struct pp_map_entry *m,
			  uint64_t file_offset)
{
	struct request r = {.kind = kind, .tag = tag, .pid = pid, .file_offset = file_offset};

	if (!l || !m || m->kind != PP_MAP_KIND_FILE || !m->path)
		return -EINVAL;
	if (relatives)
		memcpy(r.relatives, relatives, sizeof(r.relatives));
	r.map = *m;
	r.path = strdup(m->path);
	if (!r.path)
		return -ENOMEM;
	r.map.path = r.path;
	return submit(l, &r);
}

int pp_symloader_submit(struct pp_symloader *l, uint64_t tag, uint32_t pid,
			const uint32_t *relatives, const struct pp_map_entry *m)
{
	return submit_mapping(l, REQ_MAPPING, tag, pid, relatives, m, 0);
}

int pp_symloader_submit_data_type(struct pp_symloader *l, uint64_t tag, uint32_t pid,
				  const uint32_t *relatives, const struct pp_map_entry *m,
				  uint64_t file_offset)
{
	return submit_mapping(l, REQ_DATA_TYPE, tag, pid, relatives, m, file_offset);
}

int pp_symloader_submit_kernel_data_type(struct pp_symloader *l, uint64_t tag, uint64_t text_offset)
{
	struct request r = {.kind = REQ_KERNEL_DATA_TYPE, .tag = tag, .file_offset = text_offset};

	if (!l)
		return -EINVAL;
	return submit(l, &r);
}

int pp_symloader_submit_kmod_data_type(struct pp_symloader *l, uint64_t tag, const char *module,
				       uint64_t ip, const char *symbol, uint64_t symbol_addr)
{
	struct request r = {
	    .kind = REQ_KMOD_DATA_TYPE, .tag = tag, .file_offset = ip, .symbol_addr = symbol_addr};

	if (!l || !pp_kmod_name_valid(module))
		return -EINVAL;
	r.path = strdup(module);
	r.symbol = symbol ? strdup(symbol) : NULL;
	if (!r.path || (symbol && !r.symbol)) {
		request_fini(&r);
		return -ENOMEM;
	}
	return submit(l, &r);
}

void pp_symloader_kernel_modules(struct pp_symloader *l, uint32_t *typed, uint32_t *untyped,
				 char *why, size_t why_size)
{
	*typed = *untyped = 0;
	if (why && why_size)
		why[0] = '\0';
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	*typed = l->kmods_typed;
	*untyped = l->kmods_untyped;
	if (why && why_size)
		snprintf(why, why_size, "%s", l->kmod_why);
	pthread_mutex_unlock(&l->lock);
}

int pp_symloader_kernel_image(struct pp_symloader *l, char *why, size_t why_size)
{
	int state;

	if (!l)
		return 0;
	pthread_mutex_lock(&l->lock);
	state = l->st.kernel_image;
	if (why && why_size)
		snprintf(why, why_size, "%s", state ? l->kernel_why : "");
	pthread_mutex_unlock(&l->lock);
	return state;
}

static int submit_id(struct pp_symloader *l, enum req_kind kind, uint64_t tag, const char *id)
{
	struct request r = {.kind = kind, .tag = tag};

	if (!l || !id || !id[0] || strlen(id) >= sizeof(r.build_id))
		return -EINVAL;
	memcpy(r.build_id, id, strlen(id) + 1);
	return submit(l, &r);
}

int pp_symloader_submit_debug(struct pp_symloader *l, uint64_t tag, const char *build_id)
{
	return submit_id(l, REQ_DEBUG, tag, build_id);
}

int pp_symloader_forget_build_id(struct pp_symloader *l, const char *build_id)
{
	return submit_id(l, REQ_FORGET, 0, build_id);
}

int pp_symloader_ready(const struct pp_symloader *l)
{
	return l && atomic_load_explicit(&l->ready, memory_order_acquire) > 0;
}

size_t pp_symloader_take(struct pp_symloader *l, struct pp_symload_result *out, size_t max)
{
	size_t n;

	if (!l || !max)
		return 0;
	pthread_mutex_lock(&l->lock);
	n = l->res_n < max ? l->res_n : max;
	if (n) {
		memcpy(out, l->res, n * sizeof(*out));
		memmove(l->res, l->res + n, (l->res_n - n) * sizeof(*l->res));
		l->res_n -= n;
	}
	atomic_store_explicit(&l->ready, l->res_n, memory_order_release);
	pthread_mutex_unlock(&l->lock);
	return n;
}

static void kick_locked(struct pp_symloader *l)
{
	if (l->q_woken < l->q_len) {
		l->q_woken = l->q_len;
		pthread_cond_signal(&l->work);
	}
}

void pp_symloader_kick(struct pp_symloader *l)
{
	if (!l || !l->opts.kick_by_caller)
		return;
	pthread_mutex_lock(&l->lock);
	kick_locked(l);
	pthread_mutex_unlock(&l->lock);
}

static int wait_until(struct pp_symloader *l, uint64_t timeout_ms, bool for_idle)
{
	struct timespec until = pp_deadline_after_ms(CLOCK_MONOTONIC, timeout_ms);
	int err = 0;

	if (!l)
		return 0;
	pthread_mutex_lock(&l->lock);
	kick_locked(l); /* what the caller waits for may be queued unkicked */
	while (!err && (for_idle ? (l->q_len || l->busy) : l->res_n == 0))
		err = pthread_cond_timedwait(&l->changed, &l->lock, &until);
	pthread_mutex_unlock(&l->lock);
	return err ? -ETIMEDOUT : 0;
}

int pp_symloader_wait_result(struct pp_symloader *l, uint64_t timeout_ms)
{
	return wait_until(l, timeout_ms, false);
}

int pp_symloader_wait_idle(struct pp_symloader *l, uint64_t timeout_ms)
{
	return wait_until(l, timeout_ms, true);
}

void pp_symloader_get_stats(struct pp_symloader *l, struct pp_symloader_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	*out = l->st;
	out->pending = l->q_len + (l->busy ? 1 : 0);
	pthread_mutex_unlock(&l->lock);
}

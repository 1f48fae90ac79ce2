/*
 * The kernel's side-band records (mmap, comm, fork, exit) from a dummy software event per
 * CPU, read from its perf ring buffer as perf record does for its side-band.
 */
#include "sideband.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RING_PAGES 32u
#define MAX_RING_PAGES 4096u

struct sb_ring {
	int fd;
	void *base; /* the control page, then the data pages */
	size_t data_size;
};

struct pp_sideband {
	struct sb_ring *rings;
	int *fds;
	size_t nr_rings;
	size_t page_size;
	/* what one drain read of every ring, records whole, sorted by time before use */
	uint8_t *batch;
	size_t batch_cap, batch_used;
	struct sb_batch_rec *recs;
	size_t nr_recs, max_recs;
	struct pp_sideband_stats st;
};

struct sb_batch_rec {
	uint64_t time;
	size_t off, len;
};

/* The sample_id trailer of every record (sample_id_all), for sample_type TID | TIME. */
struct sb_sample_id {
	uint32_t pid, tid;
	uint64_t time;
};

static int get_u32(const uint8_t *p, size_t len, size_t off, uint32_t *v)
{
	if (off > len || len - off < sizeof(*v))
		return -EINVAL;
	memcpy(v, p + off, sizeof(*v));
	return 0;
}

static int get_u64(const uint8_t *p, size_t len, size_t off, uint64_t *v)
{
	if (off > len || len - off < sizeof(*v))
		return -EINVAL;
	memcpy(v, p + off, sizeof(*v));
	return 0;
}

/*
 * A NUL-terminated string at [off, end) of the record: the kernel pads names with NULs to 8
 * bytes. Where none is found the record is malformed.
 */
static char *get_string(uint8_t *p, size_t off, size_t end)
{
	if (off >= end || !memchr(p + off, '\0', end - off))
		return NULL;
	return (char *)p + off;
}

int pp_sideband_parse(void *rec, size_t len, struct pp_sb_event *out)
{
	uint8_t *p = rec;
	struct perf_event_header h;
	struct sb_sample_id sid;
	size_t body, end;
	uint64_t v64;
	const char *s;

	if (!rec || !out || len < sizeof(h) + sizeof(sid))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (h.size != len || h.size % 8)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	end = len - sizeof(sid); /* the trailer is last */
	memcpy(&sid, p + end, sizeof(sid));
	out->time_ns = sid.time;
	body = sizeof(h);
	switch (h.type) {
	case PERF_RECORD_MMAP2:
		out->kind = PP_SB_MMAP;
		if (get_u32(p, end, body, &out->pid) || get_u32(p, end, body + 4, &out->tid) ||
		    get_u64(p, end, body + 8, &out->start) ||
		    get_u64(p, end, body + 16, &out->len) ||
		    get_u64(p, end, body + 24, &out->pgoff))
			return -EINVAL;
		if (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
			/* not asked for: the identity check needs the device and inode */
			return -EINVAL;
		}
		if (get_u32(p, end, body + 32, &out->dev_major) ||
		    get_u32(p, end, body + 36, &out->dev_minor) ||
		    get_u64(p, end, body + 40, &out->inode) ||
		    get_u64(p, end, body + 48, &out->ino_generation) ||
		    get_u32(p, end, body + 56, &out->prot) ||
		    get_u32(p, end, body + 60, &out->flags))
			return -EINVAL;
		out->path = get_string(p, body + 64, end);
		if (!out->path || !out->len || out->start + out->len < out->start)
			return -EINVAL;
		if (strlen(out->path) >= PP_SB_PATH_MAX)
			return -EINVAL;
		return 0;
	case PERF_RECORD_COMM:
		out->kind = PP_SB_COMM;
		out->exec = !!(h.misc & PERF_RECORD_MISC_COMM_EXEC);
		if (get_u32(p, end, body, &out->pid) || get_u32(p, end, body + 4, &out->tid))
			return -EINVAL;
		s = get_string(p, body + 8, end);
		if (!s)
			return -EINVAL;
		strncpy(out->comm, s, sizeof(out->comm) - 1);
		return 0;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		out->kind = h.type == PERF_RECORD_FORK ? PP_SB_FORK : PP_SB_EXIT;
		if (get_u32(p, end, body, &out->pid) || get_u32(p, end, body + 4, &out->ppid) ||
		    get_u32(p, end, body + 8, &out->tid) ||
		    get_u32(p, end, body + 12, &out->ptid) || get_u64(p, end, body + 16, &v64))
			return -EINVAL;
		return 0;
	case PERF_RECORD_LOST:
		out->kind = PP_SB_LOST;
		if (get_u64(p, end, body, &v64) || get_u64(p, end, body + 8, &out->lost))
			return -EINVAL;
		return 0;
	default:
		return -ENOENT;
	}
}

static int sb_open_cpu(int cpu, bool mmap_data)
{
	struct perf_event_attr attr = {
	    .type = PERF_TYPE_SOFTWARE,
	    .size = sizeof(attr),
	    .config = PERF_COUNT_SW_DUMMY,
	    .sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
	    .sample_id_all = 1,
	    .mmap = 1,
	    .mmap2 = 1,
	    .comm = 1,
	    .comm_exec = 1,
	    .task = 1,
	    .mmap_data = mmap_data,
	    .use_clockid = 1,
	    .clockid = CLOCK_MONOTONIC,
	    /*
	     * A wake-up per record written (wakeup_events counts samples only; side-band
	     * records wake by watermark): a new process's unwind list is made before it runs
	     * long.
	     */
	    .watermark = 1,
	    .wakeup_watermark = 1,
	};
	int fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

struct pp_sideband *pp_sideband_open(const struct pp_sideband_opts *opts)
{
	uint32_t pages = opts && opts->ring_pages ? opts->ring_pages : DEFAULT_RING_PAGES;
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	struct pp_sideband *sb;
	int err = 0;

	if (pages > MAX_RING_PAGES || (pages & (pages - 1)) || ncpus <= 0) {
		errno = EINVAL;
		return NULL;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	sb->page_size = (size_t)sysconf(_SC_PAGESIZE);
	sb->rings = calloc((size_t)ncpus, sizeof(*sb->rings));
	sb->fds = calloc((size_t)ncpus, sizeof(*sb->fds));
	if (!sb->rings || !sb->fds) {
		err = -ENOMEM;
		goto fail;
	}
	for (long cpu = 0; cpu < ncpus; cpu++) {
		struct sb_ring *r = &sb->rings[sb->nr_rings];
		int fd = sb_open_cpu((int)cpu, opts && opts->mmap_data);

		if (fd == -ENODEV || fd == -EINVAL) /* an offline or absent CPU */
			continue;
		if (fd < 0) {
			err = fd;
			goto fail;
		}
		r->fd = fd;
		r->data_size = (size_t)pages * sb->page_size;
		r->base = mmap(NULL, r->data_size + sb->page_size, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, 0);
		if (r->base == MAP_FAILED) {
			err = -errno;
			close(fd);
			goto fail;
		}
		sb->fds[sb->nr_rings++] = fd;
	}
	if (!sb->nr_rings) {
		err = -ENODEV;
		goto fail;
	}
	/* every ring full at once; a record is at least a header and its trailer (24 bytes) */
	sb->batch_cap = sb->nr_rings * (size_t)pages * sb->page_size;
	sb->max_recs = sb->batch_cap / 24;
	sb->batch = malloc(sb->batch_cap);
	sb->recs = malloc(sb->max_recs * sizeof(sb->recs[0]));
	if (!sb->batch || !sb->recs) {
		err = -ENOMEM;
		goto fail;
	}
	return sb;
fail:
	pp_sideband_free(sb);
	errno = -err;
	return NULL;
}

void pp_sideband_free(struct pp_sideband *sb)
{
	if (!sb)
		return;
	for (size_t i = 0; sb->rings && i < sb->nr_rings; i++) {
		munmap(sb->rings[i].base, sb->rings[i].data_size + sb->page_size);
		close(sb->rings[i].fd);
	}
	free(sb->rings);
	free(sb->fds);
	free(sb->batch);
	free(sb->recs);
	free(sb);
}

static int cmp_batch_rec(const void *a, const void *b)
{
	const struct sb_batch_rec *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Copies what ring r holds into the batch and frees its space in the ring. */
static void collect_ring(struct pp_sideband *sb, struct sb_ring *r)
{
	struct perf_event_mmap_page *meta = r->base;
	uint8_t *data = (uint8_t *)r->base + sb->page_size;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;

	while (tail < head) {
		struct perf_event_header h;
		size_t off = tail % r->data_size, first = r->data_size - off;
		struct sb_batch_rec *br;
		uint8_t *rec;

		/* the header may wrap too */
		if (first >= sizeof(h)) {
			memcpy(&h, data + off, sizeof(h));
		} else {
			memcpy(&h, data + off, first);
			memcpy((uint8_t *)&h + first, data, sizeof(h) - first);
		}
		if (h.size < sizeof(h) || h.size > head - tail ||
		    sb->batch_used + h.size > sb->batch_cap || sb->nr_recs == sb->max_recs) {
			/* a ring we cannot follow (or a batch full): start over at the head */
			sb->st.bad++;
			tail = head;
			break;
		}
		rec = sb->batch + sb->batch_used;
		if (first >= h.size) {
			memcpy(rec, data + off, h.size);
		} else {
			memcpy(rec, data + off, first);
			memcpy(rec + first, data, h.size - first);
		}
		br = &sb->recs[sb->nr_recs++];
		br->off = sb->batch_used;
		br->len = h.size;
		br->time = 0;
		if (h.size >= sizeof(h) + sizeof(struct sb_sample_id))
			memcpy(&br->time, rec + h.size - sizeof(uint64_t), sizeof(br->time));
		sb->batch_used += h.size;
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

size_t pp_sideband_drain(struct pp_sideband *sb, pp_sb_fn cb, void *ctx)
{
	size_t n = 0;

	if (!sb || !cb)
		return 0;
	sb->batch_used = 0;
	sb->nr_recs = 0;
	for (size_t i = 0; i < sb->nr_rings; i++)
		collect_ring(sb, &sb->rings[i]);
	if (!sb->nr_recs)
		return 0;
	/* each CPU's records are in time order, not those of different CPUs: a fork on one
	 * and the child's exec on another would be seen the wrong way round */
	qsort(sb->recs, sb->nr_recs, sizeof(sb->recs[0]), cmp_batch_rec);
	for (size_t i = 0; i < sb->nr_recs; i++) {
		struct pp_sb_event ev;
		int err = pp_sideband_parse(sb->batch + sb->recs[i].off, sb->recs[i].len, &ev);

		if (err == -ENOENT)
			continue;
		if (err) {
			sb->st.bad++;
			continue;
		}
		sb->st.records++;
		if (ev.kind == PP_SB_LOST) {
			sb->st.lost += ev.lost;
			sb->st.lost_events++;
		}
		cb(ctx, &ev);
		n++;
	}
	sb->st.drains++;
	return n;
}

const int *pp_sideband_fds(const struct pp_sideband *sb, size_t *n)
{
	*n = sb ? sb->nr_rings : 0;
	return sb ? sb->fds : NULL;
}

void pp_sideband_get_stats(const struct pp_sideband *sb, struct pp_sideband_stats *out)
{
	if (!out)
		return;
	if (!sb) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = sb->st;
}

size_t pp_sideband_ring_bytes(const struct pp_sideband *sb)
{
	size_t b = 0;

	for (size_t i = 0; sb && i < sb->nr_rings; i++)
		b += sb->rings[i].data_size + sb->page_size;
	return b;
}

/*
 * cgroup id (or pid) -> container and pod, cached. The table is an open hash of fixed slots
 * with an LRU list, sized at construction; entries remember the metadata generation they were
 * enriched at, so pod metadata that arrives after the first sample of a container reaches it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <pebsprof/record.h>

#include "cgroup_ids.h"
#include "container_meta.h"
#include "base/fsutil.h"

#define DEFAULT_MAX_ENTRIES 4096
#define DEFAULT_MAX_CGROUP_PATHS 16384
#define PID_KEY_FLAG (1ull << 63)

/* Per-process keys: the pid and its generation in one word that no cgroup id takes. */
static uint64_t pid_key(uint32_t pid, uint64_t generation)
{
	return PID_KEY_FLAG | (generation & 0x7fffffffull) << 32 | pid;
}
#define NO_SLOT UINT32_MAX

struct cm_entry {
	uint64_t key; /* cgroup id, v1 and v2 key | PP_CONTAINER_KEY_V1, or pid | PID_KEY_FLAG */
	uint64_t generation;
	bool used;
	bool enriched;
	bool resolved;	/* false: the cgroup was not found yet; asked again on the next hit */
	uint32_t hnext; /* hash chain */
	uint32_t lru_prev, lru_next;
	struct pp_container_info info;
};

struct pp_container_meta {
	struct pp_cgroup_ids *ids; /* NULL in per-process mode */
	bool hybrid; /* cgroup v1 hierarchies are mounted too: see pp_container_meta_lookup */
	char proc_root[256];
	struct pp_container_enricher enricher;
	struct cm_entry *entries;
	uint32_t *buckets;
	size_t nbuckets, max_entries, nused;
	uint32_t lru_head, lru_tail; /* head = most recent */
	uint32_t free_hint;
	struct pp_container_info scratch; /* answer when the table cannot hold one */
	struct pp_container_meta_stats stats;
	struct pp_cgroup_v1_key v1key; /* how the shim keys samples here (subsys 0: unknown) */
};

static uint64_t hash_key(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static void lru_unlink(struct pp_container_meta *m, uint32_t i)
{
	struct cm_entry *e = &m->entries[i];

	if (e->lru_prev != NO_SLOT)
		m->entries[e->lru_prev].lru_next = e->lru_next;
	else
		m->lru_head = e->lru_next;
	if (e->lru_next != NO_SLOT)
		m->entries[e->lru_next].lru_prev = e->lru_prev;
	else
		m->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NO_SLOT;
}

static void lru_push_front(struct pp_container_meta *m, uint32_t i)
{
	struct cm_entry *e = &m->entries[i];

	e->lru_prev = NO_SLOT;
	e->lru_next = m->lru_head;
	if (m->lru_head != NO_SLOT)
		m->entries[m->lru_head].lru_prev = i;
	m->lru_head = i;
	if (m->lru_tail == NO_SLOT)
		m->lru_tail = i;
}

static uint32_t *chain_of(struct pp_container_meta *m, uint64_t key)
{
	return &m->buckets[hash_key(key) & (m->nbuckets - 1)];
}

static uint32_t find(struct pp_container_meta *m, uint64_t key)
{
	for (uint32_t i = *chain_of(m, key); i != NO_SLOT; i = m->entries[i].hnext)
		if (m->entries[i].key == key)
			return i;
	return NO_SLOT;
}

static void remove_slot(struct pp_container_meta *m, uint32_t i)
{
	struct cm_entry *e = &m->entries[i];
	uint32_t *pp = chain_of(m, e->key);

	while (*pp != i)
		pp = &m->entries[*pp].hnext;
	*pp = e->hnext;
	lru_unlink(m, i);
	e->used = false;
	m->nused--;
}

/* A free slot, evicting the least recently used entry when the table is full. */
static uint32_t take_slot(struct pp_container_meta *m)
{
	if (m->nused == m->max_entries) {
		uint32_t victim = m->lru_tail;

		remove_slot(m, victim);
		m->stats.evictions++;
		return victim;
	}
	for (size_t n = 0; n < m->max_entries; n++) {
		uint32_t i = (uint32_t)((m->free_hint + n) % m->max_entries);

		if (!m->entries[i].used) {
			m->free_hint = i + 1;
			return i;
		}
	}
	return NO_SLOT; /* not reached: nused < max_entries */
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

int pp_proc_cgroup_parse(const char *buf, size_t len, struct pp_container_ref *out)
{
	struct pp_container_ref pod_only;
	bool have_pod = false, any_line = false;

	if (!buf || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	memset(&pod_only, 0, sizeof(pod_only));
	/* Two passes: the unified "0::" line first, then the v1 controller lines. */
	for (int pass = 0; pass < 2; pass++) {
		const char *p = buf, *end = buf + len;

		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *line_end = nl ? nl : end;
			const char *c1 = memchr(p, ':', (size_t)(line_end - p));
			const char *c2 =
			    c1 ? memchr(c1 + 1, ':', (size_t)(line_end - c1 - 1)) : NULL;
			struct pp_container_ref ref;

			if (line_end == p || (line_end - p == 1 && is_space(*p))) {
				p = line_end + 1;
				continue;
			}
			if (!c2 || c1 == p)
				return -EINVAL;
			for (const char *d = p; d < c1; d++)
				if (*d < '0' || *d > '9')
					return -EINVAL;
			any_line = true;
			bool unified = (c1 - p == 1 && *p == '0' && c2 == c1 + 1);
			const char *path = c2 + 1;
			size_t plen = (size_t)(line_end - path);

			if (unified == (pass == 0) && plen > 0 &&
			    pp_cgroup_path_parse(path, plen, &ref) >= 0) {
				if (ref.id[0]) {
					*out = ref;
					return 1;
				}
				if (ref.pod_uid[0] && !have_pod) {
					pod_only = ref;
					have_pod = true;
				}
			}
			p = line_end + 1;
		}
	}
	if (!any_line)
		return -EINVAL;
	if (have_pod)
		*out = pod_only;
	return 0;
}

/* The inode of <root>/<path>, the cgroup's kernfs id; 0 where it cannot be seen. */
static uint64_t cgroup_ino(const char *root, const char *path, size_t n)
{
	char full[PATH_MAX + 512];
	struct stat st;

	if (snprintf(full, sizeof(full), "%s%.*s", root, (int)n, path) >= (int)sizeof(full) ||
	    stat(full, &st) != 0)
		return 0;
	return (uint64_t)st.st_ino;
}

/*
 * Whether the cgroups /proc/PID/cgroup text buf names make key (PP_CONTAINER_KEY_V1): a
 * process read for a key may have moved since its sample (a runtime's init joins its
 * container's cgroup before it execs), and its answer would then be the key's for all of its
 * processes. Where a cgroup's directory cannot be seen (another cgroup namespace, unknown
 * mounts) nothing is known against the answer, and it stands.
 */
static bool key_matches(struct pp_container_meta *m, const char *buf, size_t len, uint64_t key)
{
	const struct pp_cgroup_v1_key *k = &m->v1key;
	uint64_t v1 = 0, v2 = 0;
	bool v2_seen = !k->with_v2;

	if (!k->subsys)
		return true;
	for (const char *p = buf, *end = buf + len; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *c1, *c2;

		if (!eol)
			eol = end;
		c1 = memchr(p, ':', (size_t)(eol - p));
		c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (c2 && c2 == c1 + 1 && k->with_v2) { /* "0::/path": the unified hierarchy */
			v2 = cgroup_ino(k->v2_root, c2 + 1, (size_t)(eol - c2 - 1));
			v2_seen = true;
		} else if (c2 && pp_cgroup_list_has(c1 + 1, (size_t)(c2 - c1 - 1), k->name)) {
			/* "N:memory:/path", "N:cpu,cpuacct:/path" */
			v1 = cgroup_ino(k->v1_root, c2 + 1, (size_t)(eol - c2 - 1));
		}
		p = eol + 1;
	}
	if (!v1 || !v2_seen || (k->with_v2 && !v2))
		return true;
	if (pp_cgroup_key(v1, v2) == (key & PP_CGROUP_KEY_MASK))
		return true;
	m->stats.key_mismatches++;
	return false;
}

/*
 * Returns false when the cgroup or process could not be found (info says "no container");
 * *gone tells that the process no longer exists.
 */
static bool resolve_cgroup(struct pp_container_meta *m, bool per_process, uint64_t cgroup_id,
			   uint32_t pid, struct pp_container_info *info, bool *gone)
{
	memset(info, 0, sizeof(*info));
	*gone = false;
	if (!per_process) {
		/* Rate-limited inside: a new cgroup is found by the next walk, not every miss. */
		const char *path = pp_cgroup_ids_lookup(m->ids, cgroup_id);

		if (path) {
			pp_cgroup_path_parse(path, strlen(path), &info->ref);
			return true;
		}
	} else {
		char fname[320], buf[8192];
		ssize_t n;

		pp_pathf(fname, sizeof(fname), "%s/%u/cgroup", m->proc_root, pid);
		n = pp_read_small_file(fname, buf, sizeof(buf));
		m->stats.proc_reads++;
		if (n > 0 &&
		    (!(cgroup_id & PP_CONTAINER_KEY_V1) || cgroup_id == PP_CONTAINER_KEY_V1 ||
		     key_matches(m, buf, (size_t)n, cgroup_id)) &&
		    pp_proc_cgroup_parse(buf, (size_t)n, &info->ref) >= 0)
			return true;
		memset(info, 0, sizeof(*info));
		*gone = n == -ENOENT || n == -ESRCH;
	}
	m->stats.unresolved++;
	return false;
}

/*
 * Whether an entry is settled: resolved, or a process's own entry whose process is gone (its
 * pid and generation never come back: asking /proc again at each of its samples would only
 * fail again). A cgroup's entry is asked again: the next process met in it may be alive.
 */
static bool settle(struct pp_container_meta *m, uint64_t key, bool per_process, uint64_t cgroup_id,
		   uint32_t pid, struct pp_container_info *info)
{
	bool gone;

	if (resolve_cgroup(m, per_process, cgroup_id, pid, info, &gone))
		return true;
	return gone && (key & PID_KEY_FLAG);
}

static bool enrich(struct pp_container_meta *m, struct pp_container_info *info)
{
	if (!m->enricher.enrich || (!info->ref.id[0] && !info->ref.pod_uid[0]))
		return false;
	if (m->enricher.enrich(m->enricher.ctx, info) != 0)
		return false;
	m->stats.enriched++;
	return true;
}

static uint64_t current_generation(const struct pp_container_meta *m)
{
	return m->enricher.generation ? m->enricher.generation(m->enricher.ctx) : 0;
}

static const struct pp_container_info *lookup_key(struct pp_container_meta *m, uint64_t key,
						  bool per_process, uint64_t cgroup_id,
						  uint32_t pid)
{
	uint64_t gen = current_generation(m);
	uint32_t i;

	m->stats.lookups++;
	i = find(m, key);
	if (i != NO_SLOT) {
		struct cm_entry *e = &m->entries[i];

		m->stats.hits++;
		if (!e->resolved &&
		    (e->resolved = settle(m, key, per_process, cgroup_id, pid, &e->info))) {
			e->enriched = enrich(m, &e->info);
			e->generation = gen;
		} else if (e->generation != gen && !e->enriched) {
			/* New metadata since this container was last asked for. */
			e->enriched = enrich(m, &e->info);
			e->generation = gen;
		}
		lru_unlink(m, i);
		lru_push_front(m, i);
		return &e->info;
	}
	m->stats.misses++;
	i = take_slot(m);
	if (i == NO_SLOT) {
		settle(m, key, per_process, cgroup_id, pid, &m->scratch);
		enrich(m, &m->scratch);
		return &m->scratch;
	}
	struct cm_entry *e = &m->entries[i];

	e->resolved = settle(m, key, per_process, cgroup_id, pid, &e->info);
	e->enriched = enrich(m, &e->info);
	e->generation = gen;
	e->key = key;
	e->used = true;
	uint32_t *chain = chain_of(m, key);

	e->hnext = *chain;
	*chain = i;
	lru_push_front(m, i);
	m->nused++;
	return &e->info;
}

const struct pp_container_info *pp_container_meta_lookup(struct pp_container_meta *m,
							 uint64_t cgroup_id, uint32_t pid,
							 uint64_t pid_generation)
{
	const struct pp_container_info *info;

	if (cgroup_id & PP_CONTAINER_KEY_V1) {
		m->stats.v1_lookups++;
		/* the bit alone: no key for the task; its own file is asked then */
		if (cgroup_id & ~PP_CONTAINER_KEY_V1)
			return lookup_key(m, cgroup_id, true, cgroup_id, pid);
		return lookup_key(m, pid_key(pid, pid_generation), true, cgroup_id, pid);
	}
	if (!m->ids)
		return lookup_key(m, pid_key(pid, pid_generation), true, cgroup_id, pid);
	info = lookup_key(m, cgroup_id, false, cgroup_id, pid);
	/*
	 * Hybrid hosts: runtimes with the cgroupfs driver place containers in the v1 hierarchies
	 * only, and the unified one shows their tasks under the runtime's service. What the
	 * process's own cgroup file says is asked then, once per process.
	 */
	if (m->hybrid && !info->ref.id[0] && pid)
		return lookup_key(m, pid_key(pid, pid_generation), true, cgroup_id, pid);
	return info;
}

const char *pp_container_meta_cgroup2_root(const struct pp_container_meta *m)
{
	return m && m->ids ? pp_cgroup_ids_root(m->ids) : NULL;
}

void pp_container_meta_get_stats(const struct pp_container_meta *m,
				 struct pp_container_meta_stats *out)
{
	*out = m->stats;
	out->entries = m->nused;
	out->per_process = m->ids == NULL;
	out->hybrid = m->hybrid;
}

struct pp_container_meta *pp_container_meta_new(const struct pp_container_meta_opts *opts)
{
	struct pp_container_meta *m;
	size_t max = opts && opts->max_entries ? opts->max_entries : DEFAULT_MAX_ENTRIES;
	const char *proc_root = opts && opts->proc_root ? opts->proc_root : "/proc";

	if (max >= NO_SLOT || strlen(proc_root) >= sizeof(m->proc_root)) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(m->proc_root, sizeof(m->proc_root), "%s", proc_root);
	if (opts)
		m->enricher = opts->enricher;
	m->max_entries = max;
	m->nbuckets = 16;
	while (m->nbuckets < max)
		m->nbuckets <<= 1;
	m->entries = calloc(max, sizeof(*m->entries));
	m->buckets = malloc(m->nbuckets * sizeof(*m->buckets));
	if (!m->entries || !m->buckets)
		goto fail;
	memset(m->buckets, 0xff, m->nbuckets * sizeof(*m->buckets));
	m->lru_head = m->lru_tail = NO_SLOT;
	/* as the shim's loader chose: keys it made are checked against what processes say */
	(void)pp_cgroup_v1_key_choose(proc_root, &m->v1key);
	if (!opts || !opts->per_process) {
		struct pp_cgroup_ids_opts io = {
		    .cgroup2_root = opts ? opts->cgroup2_root : NULL,
		    .proc_root = proc_root,
		    .max_entries = opts && opts->max_cgroup_paths ? opts->max_cgroup_paths
								  : DEFAULT_MAX_CGROUP_PATHS,
		};
		/* One read of mountinfo answers both: where cgroup2 is, and whether v1 is too. */
		char *mi = NULL, root[PATH_MAX];
		ssize_t n = pp_mountinfo_read(proc_root, &mi);

		m->hybrid = n > 0 && pp_mountinfo_has_cgroup1(mi, (size_t)n);
		if (!io.cgroup2_root) {
			int err =
			    n < 0 ? (int)n
				  : pp_mountinfo_find_cgroup2(mi, (size_t)n, root, sizeof(root));

			io.cgroup2_root = err ? NULL : root;
			errno = -err;
		}
		free(mi);
		if (io.cgroup2_root)
			m->ids = pp_cgroup_ids_new_opts(&io);
		/* No cgroup v2 here: fall back to /proc/PID/cgroup per process. */
		if (!m->ids && errno != ENOENT)
			goto fail;
	}
	return m;
fail:
	pp_container_meta_free(m);
	return NULL;
}

void pp_container_meta_free(struct pp_container_meta *m)
{
	if (!m)
		return;
	pp_cgroup_ids_free(m->ids);
	free(m->entries);
	free(m->buckets);
	free(m);
}

size_t pp_container_info_attrs(const struct pp_container_info *info, struct pp_label *out,
			       size_t max)
{
	size_t n = 0;
	static const struct {
		const char *kind, *key;
	} workload_keys[] = {
	    {"deployment", "k8s.deployment.name"},   {"daemonset", "k8s.daemonset.name"},
	    {"statefulset", "k8s.statefulset.name"}, {"job", "k8s.job.name"},
	    {"cronjob", "k8s.cronjob.name"},	     {"replicaset", "k8s.replicaset.name"},
	};
	const char *runtime = pp_container_runtime_name(info->ref.runtime);

#define PUT(k, v)                                                                                  \
	do {                                                                                       \
		if ((v) && (v)[0] && n < max)                                                      \
			out[n++] = (struct pp_label){.key = (k), .value = (v)};                    \
	} while (0)
	PUT("container.id", info->ref.id);
	PUT("container.runtime", runtime);
	PUT("k8s.pod.uid", info->ref.pod_uid);
	PUT("k8s.pod.name", info->pod_name);
	PUT("k8s.namespace.name", info->namespace_name);
	PUT("k8s.container.name", info->container_name);
	for (size_t i = 0; i < sizeof(workload_keys) / sizeof(workload_keys[0]); i++)
		if (!strcmp(info->workload_kind, workload_keys[i].kind))
			PUT(workload_keys[i].key, info->workload_name);
	PUT("service.name", info->service_name);
#undef PUT
	return n;
}

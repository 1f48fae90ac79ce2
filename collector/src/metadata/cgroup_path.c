/*
 * cgroup path -> container ID, runtime, pod UID and QoS. Names are matched per path component
 * and exactly (prefix, 64 hex, suffix), not by searching for 64 hex digits anywhere, so that
 * host cgroups which merely mention an ID (containerd's "...-<id>-rootfs.mount", conmon's
 * "crio-conmon-<id>.scope") never pass for the container itself. The formats are those of the
 * kubelet's systemd and cgroupfs drivers, containerd, CRI-O, docker and podman.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cgroup_path.h"

#define ID_LEN 64
#define UUID_LEN 36

struct span {
	const char *p;
	size_t n;
};

struct pod_info {
	char uid[UUID_LEN + 1];
	enum pp_k8s_qos qos;
};

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool all_lower_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_lower_hex(p[i]))
			return false;
	return true;
}

static bool span_eq(struct span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.n == n && memcmp(s.p, lit, n) == 0;
}

static bool has_prefix(struct span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.n >= n && memcmp(s.p, lit, n) == 0;
}

static bool has_suffix(struct span s, const char *lit)
{
	size_t n = strlen(lit);

	return s.n >= n && memcmp(s.p + s.n - n, lit, n) == 0;
}

/* s is "<pfx><64 hex><sfx>": copy the ID into id. */
static bool match_id(struct span s, const char *pfx, const char *sfx, char *id)
{
	size_t pn = strlen(pfx), sn = strlen(sfx);

	if (s.n != pn + ID_LEN + sn || !has_prefix(s, pfx) || !has_suffix(s, sfx))
		return false;
	if (!all_lower_hex(s.p + pn, ID_LEN))
		return false;
	memcpy(id, s.p + pn, ID_LEN);
	id[ID_LEN] = '\0';
	return true;
}

/*
 * A systemd unit name for a container: "<runtime>-<id>.scope". CRI-O and podman under the
 * cgroupfs driver drop ".scope". The conmon companions ("crio-conmon-<id>.scope") fail the
 * hex check and so never match.
 */
static enum pp_container_runtime match_container(struct span s, struct span parent, char *id)
{
	if (match_id(s, "cri-containerd-", ".scope", id))
		return PP_RUNTIME_CONTAINERD;
	if (match_id(s, "crio-", ".scope", id) || match_id(s, "crio-", "", id))
		return PP_RUNTIME_CRIO;
	if (match_id(s, "docker-", ".scope", id))
		return PP_RUNTIME_DOCKER;
	if (match_id(s, "libpod-", ".scope", id) || match_id(s, "libpod-", "", id))
		return PP_RUNTIME_PODMAN;
	if (match_id(s, "", "", id))
		return span_eq(parent, "docker") ? PP_RUNTIME_DOCKER : PP_RUNTIME_UNKNOWN;
	return PP_RUNTIME_NONE;
}

/* The runtime field of containerd's v1 "<parent slice>:<runtime>:<id>" cgroup names. */
static enum pp_container_runtime runtime_word(struct span s)
{
	if (span_eq(s, "cri-containerd"))
		return PP_RUNTIME_CONTAINERD;
	if (span_eq(s, "crio"))
		return PP_RUNTIME_CRIO;
	if (span_eq(s, "docker"))
		return PP_RUNTIME_DOCKER;
	return PP_RUNTIME_NONE;
}

/* A pod UUID in either spelling: dashes (cgroupfs) or underscores (systemd escaping). */
static bool parse_uuid(const char *p, size_t n, char *uid)
{
	if (n != UUID_LEN)
		return false;
	for (size_t i = 0; i < UUID_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (p[i] != '-' && p[i] != '_')
				return false;
			uid[i] = '-';
		} else {
			if (!is_lower_hex(p[i]))
				return false;
			uid[i] = p[i];
		}
	}
	uid[UUID_LEN] = '\0';
	return true;
}

static enum pp_k8s_qos qos_from_parent(struct span parent)
{
	if (span_eq(parent, "burstable"))
		return PP_QOS_BURSTABLE;
	if (span_eq(parent, "besteffort"))
		return PP_QOS_BESTEFFORT;
	if (span_eq(parent, "kubepods"))
		return PP_QOS_GUARANTEED;
	return PP_QOS_NONE;
}

/*
 * A pod cgroup: cgroupfs "pod<uid>" (QoS from the parent directory) or systemd
 * "[<prefix>-]kubepods[-<qos>]-pod<uid>.slice", where kind and k3s put "kubelet-" in front.
 * Guaranteed pods have no QoS level.
 */
static bool match_pod(struct span s, struct span parent, struct pod_info *pod)
{
	static const char slice[] = ".slice";
	const size_t slen = sizeof(slice) - 1;
	struct span head;

	if (has_prefix(s, "pod") && parse_uuid(s.p + 3, s.n - 3, pod->uid)) {
		pod->qos = qos_from_parent(parent);
		return true;
	}
	if (s.n < 3 + UUID_LEN + slen || !has_suffix(s, slice))
		return false;
	head.p = s.p;
	head.n = s.n - slen - UUID_LEN; /* "<prefix>-pod" or "pod" */
	if (!has_suffix(head, "-pod") && !span_eq(head, "pod"))
		return false;
	if (!parse_uuid(s.p + head.n, UUID_LEN, pod->uid))
		return false;
	if (has_suffix(head, "kubepods-burstable-pod"))
		pod->qos = PP_QOS_BURSTABLE;
	else if (has_suffix(head, "kubepods-besteffort-pod"))
		pod->qos = PP_QOS_BESTEFFORT;
	else if (has_suffix(head, "kubepods-pod"))
		pod->qos = PP_QOS_GUARANTEED;
	else
		pod->qos = PP_QOS_NONE;
	return true;
}

/*
 * containerd with a systemd parent but runc's cgroupfs driver (cgroup v1, or v2 without
 * SystemdCgroup) names the container "kubepods-besteffort-pod<uid>.slice:cri-containerd:<id>".
 */
static enum pp_container_runtime match_colon_form(struct span s, struct span parent,
						  struct pod_info *pod, bool *have_pod, char *id)
{
	const char *c1 = memchr(s.p, ':', s.n), *c2;
	struct span first, word, last;
	enum pp_container_runtime rt;

	if (!c1)
		return PP_RUNTIME_NONE;
	c2 = memchr(c1 + 1, ':', (size_t)(s.p + s.n - c1 - 1));
	if (!c2)
		return PP_RUNTIME_NONE;
	first = (struct span){s.p, (size_t)(c1 - s.p)};
	word = (struct span){c1 + 1, (size_t)(c2 - c1 - 1)};
	last = (struct span){c2 + 1, (size_t)(s.p + s.n - c2 - 1)};
	rt = runtime_word(word);
	if (rt == PP_RUNTIME_NONE || !match_id(last, "", "", id))
		return PP_RUNTIME_NONE;
	if (match_pod(first, parent, pod))
		*have_pod = true;
	return rt;
}

int pp_cgroup_path_parse(const char *path, size_t len, struct pp_container_ref *out)
{
	struct pod_info cur = {{0}, PP_QOS_NONE}, at_ctr = {{0}, PP_QOS_NONE};
	bool have_cur = false, have_at_ctr = false;
	enum pp_container_runtime rt = PP_RUNTIME_NONE;
	struct span parent = {"", 0}, leaf = {"", 0};
	char id[ID_LEN + 1] = "";
	size_t i = 0;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!path)
		return -EINVAL;
	if (len && path[len - 1] == '\n')
		len--;
	if (len == 0 || len > PP_CGROUP_PATH_MAX || memchr(path, '\0', len) ||
	    memchr(path, '\n', len))
		return -EINVAL;

	while (i < len) {
		struct span s;
		enum pp_container_runtime r;
		struct pod_info pod;
		bool colon_pod = false;
		char cid[ID_LEN + 1];

		while (i < len && path[i] == '/')
			i++;
		if (i == len)
			break;
		s.p = path + i;
		while (i < len && path[i] != '/')
			i++;
		s.n = (size_t)(path + i - s.p);

		r = match_container(s, parent, cid);
		if (r == PP_RUNTIME_NONE)
			r = match_colon_form(s, parent, &pod, &colon_pod, cid);
		if (colon_pod) {
			cur = pod;
			have_cur = true;
		} else if (r == PP_RUNTIME_NONE && match_pod(s, parent, &pod)) {
			cur = pod;
			have_cur = true;
		}
		if (r != PP_RUNTIME_NONE) {
			rt = r;
			memcpy(id, cid, sizeof(id));
			at_ctr = cur;
			have_at_ctr = have_cur;
		}
		parent = s;
		leaf = s;
	}

	/* systemd mount units ("...-<id>-rootfs.mount") hold no container processes. */
	if (has_suffix(leaf, ".mount"))
		rt = PP_RUNTIME_NONE;
	if (rt == PP_RUNTIME_NONE) {
		if (have_cur) {
			memcpy(out->pod_uid, cur.uid, sizeof(out->pod_uid));
			out->qos = cur.qos;
		}
		return 0;
	}
	memcpy(out->id, id, sizeof(out->id));
	out->runtime = rt;
	if (have_at_ctr) {
		memcpy(out->pod_uid, at_ctr.uid, sizeof(out->pod_uid));
		out->qos = at_ctr.qos;
	}
	return 1;
}

const char *pp_container_runtime_name(enum pp_container_runtime rt)
{
	switch (rt) {
	case PP_RUNTIME_CONTAINERD:
		return "containerd";
	case PP_RUNTIME_CRIO:
		return "cri-o";
	case PP_RUNTIME_DOCKER:
		return "docker";
	case PP_RUNTIME_PODMAN:
		return "podman";
	case PP_RUNTIME_NONE:
	case PP_RUNTIME_UNKNOWN:
		break;
	}
	return NULL;
}

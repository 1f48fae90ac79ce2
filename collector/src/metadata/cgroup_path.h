/*
 * Parser that turns one cgroup v2 path (the part after "0::" in /proc/PID/cgroup) into the
 * container it belongs to: the 64-hex container ID, the runtime that made it, and for
 * Kubernetes pods the pod UID and QoS class. These identifiers need no API server, so the
 * collector can always attach them (container.id, k8s.pod.uid) even when enrichment is down.
 */
#ifndef PP_COLLECTOR_CGROUP_PATH_H
#define PP_COLLECTOR_CGROUP_PATH_H

#include <stddef.h>

/* Longest path accepted; the kernel caps a cgroup path at PATH_MAX. */
#define PP_CGROUP_PATH_MAX 4096

enum pp_container_runtime {
	PP_RUNTIME_NONE = 0,   /* no container */
	PP_RUNTIME_CONTAINERD, /* "cri-containerd-<id>.scope", "...:cri-containerd:<id>" */
	PP_RUNTIME_CRIO,       /* "crio-<id>.scope", cgroupfs "crio-<id>" */
	PP_RUNTIME_DOCKER,  /* "docker-<id>.scope" (docker, cri-dockerd), cgroupfs "docker/<id>" */
	PP_RUNTIME_PODMAN,  /* "libpod-<id>.scope", cgroupfs "libpod-<id>" */
	PP_RUNTIME_UNKNOWN, /* a bare 64-hex cgroup (cgroupfs driver): any runtime uses it */
};

enum pp_k8s_qos {
	PP_QOS_NONE = 0, /* not a pod, or the QoS level is not in the path */
	PP_QOS_GUARANTEED,
	PP_QOS_BURSTABLE,
	PP_QOS_BESTEFFORT,
};

struct pp_container_ref {
	char id[65]; /* 64 lowercase hex + NUL; "" when no container */
	enum pp_container_runtime runtime;
	char pod_uid[37]; /* dashed UUID ("_" of the systemd driver turned back); "" if none */
	enum pp_k8s_qos qos;
};

/*
 * Parse path[0..len). One trailing '\n' is ignored, so a line read from the file works too.
 * The deepest container cgroup on the path wins (cgroups a runtime nests under its container,
 * "/init" or "/container", and Kubernetes nodes run inside a docker container, as with kind);
 * the pod fields come from the nearest pod cgroup above it. Paths seen from inside a cgroup
 * namespace ("/../../x", "x/y", "/") parse by the same rules, since only the components matter.
 *
 * *out is always reset. Returns 1 when a container was found; 0 when the path is not a
 * container's (host services, user sessions, conmon and .mount cgroups, a pod's own slice:
 * then pod_uid and qos may still be set); -EINVAL for a NULL argument, an empty or over-long
 * path, or one holding a NUL or an embedded newline.
 */
int pp_cgroup_path_parse(const char *path, size_t len, struct pp_container_ref *out);

/*
 * The OpenTelemetry container.runtime value ("containerd", "cri-o", "docker", "podman"), or
 * NULL for PP_RUNTIME_NONE and PP_RUNTIME_UNKNOWN, where the attribute is left out.
 */
const char *pp_container_runtime_name(enum pp_container_runtime rt);

#endif /* PP_COLLECTOR_CGROUP_PATH_H */

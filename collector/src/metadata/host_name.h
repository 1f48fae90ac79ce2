/*
 * The node's host name for host.name. In a pod the agent's own host name is the pod's (its
 * UTS namespace), not the node's; the node's is the host's, reached through the host's
 * processes: pid 1's root holds the host's /etc/hostname.
 */
#ifndef PP_COLLECTOR_HOST_NAME_H
#define PP_COLLECTOR_HOST_NAME_H

#include <stddef.h>

/* Where the name came from. */
enum pp_host_name_source {
	PP_HOST_NAME_OWN = 0,	/* gethostname(): the agent shares the host's UTS namespace */
	PP_HOST_NAME_HOST_FILE, /* <proc_root>/1/root/etc/hostname: the host's, from a pod */
};

/*
 * Writes the host's name into out (len > 0). When <proc_root>/self/ns/uts and
 * <proc_root>/1/ns/uts differ (the agent is in a container of its own UTS namespace, with
 * the host's pids visible) and the host's /etc/hostname holds a valid name, that is used;
 * otherwise the agent's own host name. Returns the source used.
 */
enum pp_host_name_source pp_host_name(const char *proc_root, char *out, size_t len);

#endif /* PP_COLLECTOR_HOST_NAME_H */

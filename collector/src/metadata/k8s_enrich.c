/*
 * The adapter between k8s_meta (pods by container id or pod UID) and container_meta (what a
 * sample's cgroup says). A Deployment is named rather than its ReplicaSet and a CronJob
 * rather than its Job, as people think of their workloads by those names.
 */
#include <stdio.h>
#include <string.h>

#include "k8s_enrich.h"

void pp_k8s_fill_container_info(const struct pp_k8s_container_meta *k,
				struct pp_container_info *info)
{
	static const struct {
		const char *kind;
		size_t offset;
	} owners[] = {
	    {"deployment", offsetof(struct pp_k8s_container_meta, deployment_name)},
	    {"replicaset", offsetof(struct pp_k8s_container_meta, replicaset_name)},
	    {"cronjob", offsetof(struct pp_k8s_container_meta, cronjob_name)},
	    {"job", offsetof(struct pp_k8s_container_meta, job_name)},
	    {"daemonset", offsetof(struct pp_k8s_container_meta, daemonset_name)},
	    {"statefulset", offsetof(struct pp_k8s_container_meta, statefulset_name)},
	};

	snprintf(info->pod_name, sizeof(info->pod_name), "%s", k->pod_name);
	snprintf(info->namespace_name, sizeof(info->namespace_name), "%s", k->namespace_name);
	snprintf(info->container_name, sizeof(info->container_name), "%s", k->container_name);
	snprintf(info->service_name, sizeof(info->service_name), "%s", k->service_name);
	if (!info->ref.pod_uid[0] && strlen(k->pod_uid) < sizeof(info->ref.pod_uid))
		memcpy(info->ref.pod_uid, k->pod_uid, strlen(k->pod_uid) + 1);
	if (info->ref.runtime == PP_RUNTIME_UNKNOWN || info->ref.runtime == PP_RUNTIME_NONE)
		info->ref.runtime = info->ref.id[0] ? k->runtime : info->ref.runtime;
	info->workload_kind[0] = info->workload_name[0] = '\0';
	for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
		const char *name = (const char *)k + owners[i].offset;

		if (name[0]) {
			snprintf(info->workload_kind, sizeof(info->workload_kind), "%s",
				 owners[i].kind);
			snprintf(info->workload_name, sizeof(info->workload_name), "%s", name);
			break;
		}
	}
}

static int enrich(void *ctx, struct pp_container_info *info)
{
	struct pp_k8s_container_meta k;
	int ret = pp_k8s_meta_lookup(ctx, info->ref.id[0] ? info->ref.id : NULL,
				     info->ref.pod_uid[0] ? info->ref.pod_uid : NULL, &k);

	if (ret)
		return ret;
	pp_k8s_fill_container_info(&k, info);
	return 0;
}

static uint64_t generation(void *ctx)
{
	return pp_k8s_meta_generation(ctx);
}

struct pp_container_enricher pp_k8s_enricher(struct pp_k8s_meta *m)
{
	return (struct pp_container_enricher){.enrich = enrich, .generation = generation, .ctx = m};
}

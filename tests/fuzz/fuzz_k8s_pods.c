/*
 * Fuzz target for the PodList parser (and the JSON parser under it): any bytes give 0,
 * -EPROTO or -E2BIG without reading past the buffer; a list that parses is valid JSON; every
 * record points inside the list (container -> pod, string offsets), required fields are set
 * and every string fits the array a lookup copies it into; bounds hold and change nothing
 * but what is kept.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/json.h"
#include "metadata/k8s_pods.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const struct pp_k8s_podlist *l, uint32_t off, size_t cap, int required)
{
	size_t n;

	if (off >= l->str_len)
		abort();
	n = strlen(l->str + off);
	if (n >= cap || (required && n == 0))
		abort();
}

static void check_list(const struct pp_k8s_podlist *l)
{
	for (size_t i = 0; i < l->n_pods; i++) {
		const struct pp_k8s_pod *p = &l->pods[i];

		check_str(l, p->uid, PP_K8S_UID_LEN, 1);
		check_str(l, p->name, PP_K8S_NAME_LEN, 1);
		check_str(l, p->ns, PP_K8S_NS_LEN, 1);
		check_str(l, p->node, PP_K8S_NAME_LEN, 0);
		check_str(l, p->app_name, PP_K8S_LABEL_LEN, 0);
		check_str(l, p->replicaset, PP_K8S_NAME_LEN, 0);
		check_str(l, p->deployment, PP_K8S_NAME_LEN, 0);
		check_str(l, p->daemonset, PP_K8S_NAME_LEN, 0);
		check_str(l, p->statefulset, PP_K8S_NAME_LEN, 0);
		check_str(l, p->job, PP_K8S_NAME_LEN, 0);
		check_str(l, p->cronjob, PP_K8S_NAME_LEN, 0);
		/* A Deployment only through its ReplicaSet, a CronJob only through its Job. */
		if ((p->deployment && !p->replicaset) || (p->cronjob && !p->job))
			abort();
	}
	for (size_t i = 0; i < l->n_ctrs; i++) {
		const struct pp_k8s_container *c = &l->ctrs[i];

		if (c->pod >= l->n_pods || c->runtime > PP_RUNTIME_UNKNOWN ||
		    c->kind > PP_K8S_CONTAINER_EPHEMERAL)
			abort();
		check_str(l, c->name, PP_K8S_CNAME_LEN, 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_k8s_pods_limits lim = {.max_pods = 2, .max_containers = 3};
	struct pp_k8s_podlist *a = NULL, *b = NULL;
	struct pp_json j;
	char *copy;
	int rc, rc2;

	/* An exact-size copy so a read past size is caught by ASan. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	rc = pp_k8s_pods_parse(copy, size, NULL, &a);
	if (rc != 0 && rc != -EPROTO && rc != -E2BIG && rc != -ENOMEM)
		abort();
	if (rc == 0) {
		check_list(a);
		pp_json_init(&j, copy, size, 0);
		if (pp_json_skip(&j) || pp_json_finish(&j))
			abort();
	} else if (a) {
		abort();
	}
	rc2 = pp_k8s_pods_parse(copy, size, &lim, &b);
	if (rc2 != rc && rc2 != -ENOMEM && rc != -ENOMEM)
		abort();
	if (rc2 == 0) {
		check_list(b);
		if (b->n_pods > 2 || b->n_ctrs > 3)
			abort();
		if (a && b->n_pods + b->pods_over_limit != a->n_pods)
			abort();
	}
	pp_k8s_podlist_free(a);
	pp_k8s_podlist_free(b);
	free(copy);
	return 0;
}

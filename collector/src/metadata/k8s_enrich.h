/*
 * Plugs the pod metadata store into the container metadata cache: an enricher that answers
 * from the store's current snapshot (no I/O) and whose generation is the store's.
 */
#ifndef PP_COLLECTOR_K8S_ENRICH_H
#define PP_COLLECTOR_K8S_ENRICH_H

#include "container_meta.h"
#include "k8s_meta.h"

/* The enricher for m (borrowed: m must outlive the container cache using it). */
struct pp_container_enricher pp_k8s_enricher(struct pp_k8s_meta *m);

/* Copies the pod fields of k into info; the owning workload is the most specific one. */
void pp_k8s_fill_container_info(const struct pp_k8s_container_meta *k,
				struct pp_container_info *info);

#endif /* PP_COLLECTOR_K8S_ENRICH_H */

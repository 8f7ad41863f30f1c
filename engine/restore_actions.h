/*
 * restore_actions.h: what a restore changes in an object before creating
 * it, and which objects it does not create at all, so that what it
 * creates comes back alive on a real cluster (issue 18). Velero's restore
 * item actions are the reference (pkg/restore/actions: pod_action.go,
 * job_action.go, service_action.go, secret_action.go, pvc_action.go,
 * apiservice_action.go; pkg/restore/restore.go: isCompleted,
 * resetVolumeBindingInfo, the mirror pod rule).
 *
 * Pure functions of the object: no cluster access, so they are unit-
 * tested alone and applied the same way to the live object a restore
 * compares with after an AlreadyExists (what the cluster assigned again,
 * a new clusterIP or a controller-uid, is then no difference). What
 * needs the cluster (a service account's token secrets, volume binding
 * and renaming, terminating namespaces) is in restore.c.
 */
#ifndef CAIRN_RESTORE_ACTIONS_H
#define CAIRN_RESTORE_ACTIONS_H

#include <cjson/cJSON.h>

#define RACT_SA_TOKEN_TYPE	"kubernetes.io/service-account-token"
#define RACT_ANN_SA_NAME	"kubernetes.io/service-account.name"

/*
 * Why obj (of resource resgroup, as in the archive, status included) is
 * not restored, or NULL: pods in phase Succeeded or Failed and mirror
 * pods, Jobs that completed, APIServices Kubernetes manages. The text is
 * static.
 */
const char *ract_skip(const char *resgroup, const cJSON *obj);

/* Options of ract_clean(). */
struct ract_opts {
	int preserve_node_ports;	/* Restore spec.preserveNodePorts */
};

/*
 * Drop in place what the cluster assigned and must assign again, before
 * the metadata reset (managedFields and the last-applied annotation are
 * still there to say which node ports a user chose):
 *   pods: spec.nodeName, spec.priority, service-account token volumes
 *     ("<sa>-token-*" and projected "kube-api-access-*") and their mounts;
 *   jobs: the generated selector and controller-uid labels;
 *   services: clusterIP(s) unless headless; unless preserve_node_ports,
 *     node ports (and healthCheckNodePort) the user did not set;
 *   PVs: claimRef.uid and resourceVersion, binding annotations;
 *   PVCs: binding, provisioner and selected-node annotations;
 *   service-account token secrets: the token, ca.crt and the account's
 *     uid annotation (the token controller writes them again).
 */
void ract_clean(const char *resgroup, cJSON *obj, const struct ract_opts *o);

#endif

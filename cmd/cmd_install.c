/*
 * cmd_install.c: `cairn install` and `cairn uninstall`.
 *
 * install builds the whole set of objects in memory (cJSON), in the order
 * they must exist: the namespace, the CRDs (the YAML of schema/crds/,
 * embedded at build time by schema/install/embed.sh and read with
 * libyaml), the ServiceAccount, the RBAC rules of schema/install/rbac.def,
 * the credentials Secret, the web token Secret, the default
 * BackupStorageLocation, the StatefulSet of `cairn server --listen`
 * replicas, with --use-node-agent the DaemonSet of `cairn node-agent` (off
 * by default: one more pod on every node, needed only for volume data
 * bound to a node), and the headless Service of the StatefulSet.
 *
 * Defaults meant for a real edge cluster: 2 servers on S3, 1 on a local
 * directory (more refused: the directory is one node's disk), pinned to
 * the node holding it; every container non-root (uid 65532, the image's),
 * read-only, without capabilities, RuntimeDefault seccomp, so the S3
 * servers pass Pod Security "restricted" and only what must (a hostPath:
 * the fs servers, the node-agent) needs "privileged", labelled so
 * (cairn.io/pod-security). The web endpoint is closed: a token Secret
 * (generated, kept by later runs, or --web-token-file) mounted into every
 * pod; only /healthz and /readyz answer without it.
 *
 * --dry-run prints the objects (-o yaml: a multi-document stream for
 * `kubectl apply -f -`; -o json: a v1 List) except the location, which
 * kubectl could not apply in one stream with its CRD: the servers create
 * it at start from the same spec (CAIRN_DEFAULT_LOCATION in the
 * StatefulSet, `cairn server --default-location`). Otherwise each object is
 * applied in turn: created when missing; when present, the desired object
 * is merged into the live one (maps merged key by key, lists of the same
 * length element by element, other values replaced) and written back with
 * the live resourceVersion only if that changed anything, so fields the
 * API server filled in are kept and a second run reports every object
 * "unchanged" and writes nothing. Before a workload is written, a dry-run
 * pod from its template asks the API server whether the namespace admits
 * its pods (check_admission); a Pod Security refusal stops install with
 * what to change.
 *
 * uninstall stops the servers first (StatefulSet, then it waits for their
 * pods to go), then removes the Service, RBAC, ServiceAccount, Secrets and
 * the BackupStorageLocation object, and says what it keeps. Storage is
 * never touched. The CRDs, the namespace, the Backups/Restores/Schedules
 * and the servers' journal volumes are kept unless --purge: the record of
 * every backup stays in the cluster, as Velero keeps its CRs, and a
 * reinstall picks them up. With --purge the Backups' cleanup finalizers
 * are removed before the objects go, so that deleting them can never
 * delete the backups in storage.
 */
#include "config.h"
#include "cmd/cli.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/codec.h"
#include "base/jsonutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "base/util.h"
#include "cmd/output.h"
#include "storage/crypt.h"
#include "kube/kube.h"
#include "web/web.h"

extern const char *const install_crd_files[];
extern const char *const install_crd_yaml[];

#define INSTALL_WEB_PORT 8085
#define INSTALL_FS_PATH "/var/lib/cairn/backups"
#define INSTALL_JOURNAL_DIR "/var/lib/cairn/journal"
#define INSTALL_CRED_SECRET "cairn-credentials"
#define INSTALL_CRED_KEY "cloud"
#define INSTALL_BSL_NAME "default"
#define INSTALL_NAME "cairn"
#define INSTALL_CRED_MAX (1u << 20)
#define INSTALL_WAIT_US (60 * TIME_US_PER_SEC)
#define INSTALL_FINALIZER "cairn.io/backup-cleanup"
#define INSTALL_AGENT_NAME "cairn-node-agent"
#define INSTALL_AGENT_DIR "/var/lib/cairn/node-agent"	/* journal, on the host */
#define INSTALL_HOST_ROOT "/host"	/* --volume-root of the node-agent */
#define INSTALL_TOKEN_SECRET "cairn-web-token"	/* the web endpoint's token */
#define INSTALL_ENC_SECRET "cairn-encryption"	/* backup keys, by key id */
#define INSTALL_TOKEN_KEY "token"
#define INSTALL_TOKEN_DIR "/var/run/cairn/web-token"	/* where it is mounted */
#define INSTALL_TOKEN_BYTES 32		/* random bytes of a generated token */
#define INSTALL_UID 65532		/* the image's user, the servers' uid */
#define INSTALL_PSA_LABEL "cairn.io/pod-security"	/* level a workload needs */

/* Where each kind of object lives in the API. */
struct kind_info {
	const char *kind;
	const char *group, *version, *resource;
	int namespaced;
};

static const struct kind_info kinds[] = {
	{ "Namespace", "", "v1", "namespaces", 0 },
	{ "CustomResourceDefinition", "apiextensions.k8s.io", "v1",
	  "customresourcedefinitions", 0 },
	{ "ServiceAccount", "", "v1", "serviceaccounts", 1 },
	{ "ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", 0 },
	{ "ClusterRoleBinding", "rbac.authorization.k8s.io", "v1",
	  "clusterrolebindings", 0 },
	{ "Role", "rbac.authorization.k8s.io", "v1", "roles", 1 },
	{ "RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", 1 },
	{ "Secret", "", "v1", "secrets", 1 },
	{ "BackupStorageLocation", "cairn.io", "v1", "backupstoragelocations",
	  1 },
	{ "StatefulSet", "apps", "v1", "statefulsets", 1 },
	{ "DaemonSet", "apps", "v1", "daemonsets", 1 },
	{ "Service", "", "v1", "services", 1 },
};

static const struct kind_info *
kind_find(const char *kind)
{
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (kind != NULL && strcmp(kinds[i].kind, kind) == 0)
			return &kinds[i];
	return NULL;
}

/* ---- building the objects ----------------------------------------------- */

struct install_opts {
	const char *ns;
	const char *image;
	const char *pull_policy;	/* imagePullPolicy */
	int replicas;
	const char *provider;		/* "fs" or the flag */
	const char *bucket;
	const char *prefix;
	char **config;			/* K=V */
	const char *fs_path;		/* fs: directory on the node */
	char *cred_b64;			/* owned, NULL: no Secret */
	/*
	 * Client-side encryption (--encryption-key-file / --encrypt): the
	 * key id to write with and the keys Secret's data (owned: the new key
	 * and, on a re-run, the keys already there), or NULL; enc_kept: the
	 * existing location's spec.encryption when no flag asks for one (a
	 * re-run never turns encryption off), owned or NULL.
	 */
	const char *enc_key_id;
	cJSON *enc_data;
	int enc_generated;
	cJSON *enc_kept;
	int node_agent;			/* add the node-agent DaemonSet */
	char **volume_dirs;		/* host directories it mounts */
	char *node;			/* owned: fs, the node to run on; NULL: any */
	char *web_token;		/* owned: the web endpoint's token */
};

static cJSON *
labels_obj(const char *component)
{
	cJSON *l = cJSON_CreateObject();

	cJSON_AddStringToObject(l, "app.kubernetes.io/name", INSTALL_NAME);
	if (component != NULL)
		cJSON_AddStringToObject(l, "app.kubernetes.io/component",
		    component);
	return l;
}

static cJSON *
new_obj(cJSON *arr, const char *api_version, const char *kind,
	const char *name, const char *ns)
{
	cJSON *o = cJSON_CreateObject(), *md;

	cJSON_AddStringToObject(o, "apiVersion", api_version);
	cJSON_AddStringToObject(o, "kind", kind);
	md = cJSON_AddObjectToObject(o, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	if (ns != NULL)
		cJSON_AddStringToObject(md, "namespace", ns);
	cJSON_AddItemToObject(md, "labels", labels_obj(NULL));
	cJSON_AddItemToArray(arr, o);
	return o;
}

static cJSON *
str_array(const char *comma_list)
{
	cJSON *a = cJSON_CreateArray();
	char **v;

	if (comma_list[0] == '\0') {
		cJSON_AddItemToArray(a, cJSON_CreateString(""));
		return a;
	}
	v = str_split(comma_list, ',', NULL);
	for (size_t i = 0; v[i] != NULL; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
	strv_free(v);
	return a;
}

enum { RBAC_CLUSTER, RBAC_NAMESPACE };

static void
add_rules(cJSON *role, int scope)
{
	cJSON *rules = cJSON_AddArrayToObject(role, "rules"), *r;

#define CLUSTER RBAC_CLUSTER
#define NAMESPACE RBAC_NAMESPACE
#define RBAC(sc, groups, resources, verbs, why)				\
	if ((sc) == scope) {						\
		r = cJSON_CreateObject();				\
		cJSON_AddItemToObject(r, "apiGroups", str_array(groups)); \
		cJSON_AddItemToObject(r, "resources", str_array(resources)); \
		cJSON_AddItemToObject(r, "verbs", str_array(verbs));	\
		cJSON_AddItemToArray(rules, r);				\
	}
#include "schema/install/rbac.def"
#undef RBAC
#undef CLUSTER
#undef NAMESPACE
}

static void
add_binding(cJSON *arr, const char *kind, const char *role_kind,
	const char *ns, const char *sa_ns)
{
	cJSON *b = new_obj(arr, "rbac.authorization.k8s.io/v1", kind,
	    INSTALL_NAME, ns), *ref, *subj, *s;

	ref = cJSON_AddObjectToObject(b, "roleRef");
	cJSON_AddStringToObject(ref, "apiGroup", "rbac.authorization.k8s.io");
	cJSON_AddStringToObject(ref, "kind", role_kind);
	cJSON_AddStringToObject(ref, "name", INSTALL_NAME);
	subj = cJSON_AddArrayToObject(b, "subjects");
	s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "kind", "ServiceAccount");
	cJSON_AddStringToObject(s, "name", INSTALL_NAME);
	cJSON_AddStringToObject(s, "namespace", sa_ns);
	cJSON_AddItemToArray(subj, s);
}

static cJSON *
env_var(const char *name, const char *value, const char *field_path)
{
	cJSON *e = cJSON_CreateObject();

	cJSON_AddStringToObject(e, "name", name);
	if (field_path != NULL) {
		cJSON *vf = cJSON_AddObjectToObject(e, "valueFrom");
		cJSON *fr = cJSON_AddObjectToObject(vf, "fieldRef");

		cJSON_AddStringToObject(fr, "fieldPath", field_path);
	} else
		cJSON_AddStringToObject(e, "value", value);
	return e;
}

static cJSON *
probe(const char *path, int delay, int period)
{
	cJSON *p = cJSON_CreateObject(), *h;

	h = cJSON_AddObjectToObject(p, "httpGet");
	cJSON_AddStringToObject(h, "path", path);
	cJSON_AddStringToObject(h, "port", "web");
	cJSON_AddNumberToObject(p, "initialDelaySeconds", delay);
	cJSON_AddNumberToObject(p, "periodSeconds", period);
	cJSON_AddNumberToObject(p, "timeoutSeconds", 3);
	cJSON_AddNumberToObject(p, "failureThreshold", 3);
	return p;
}

/*
 * A container's securityContext: no privilege escalation, read-only root
 * file system, every capability dropped but those of add (NULL-ended).
 * uid < 0: run as the pod's user and refuse to start as root (what
 * Pod Security "restricted" asks); else as uid.
 */
static cJSON *
container_security(const char *const *add, int uid)
{
	cJSON *sc = cJSON_CreateObject(), *caps;

	if (uid < 0) {
		cJSON_AddTrueToObject(sc, "runAsNonRoot");
	} else {
		cJSON_AddNumberToObject(sc, "runAsUser", uid);
		cJSON_AddBoolToObject(sc, "runAsNonRoot", uid != 0);
	}
	cJSON_AddFalseToObject(sc, "allowPrivilegeEscalation");
	cJSON_AddTrueToObject(sc, "readOnlyRootFilesystem");
	caps = cJSON_AddObjectToObject(sc, "capabilities");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(caps, "drop"),
	    cJSON_CreateString("ALL"));
	if (add != NULL && add[0] != NULL) {
		cJSON *a = cJSON_AddArrayToObject(caps, "add");

		for (; *add != NULL; add++)
			cJSON_AddItemToArray(a, cJSON_CreateString(*add));
	}
	return sc;
}

/*
 * The pod's securityContext: user and group uid (files of the volumes
 * made group uid too when it is not root) and the container runtime's
 * default seccomp profile; nonroot: refuse to start any container as root.
 */
static void
pod_security(cJSON *pspec, int uid, int nonroot)
{
	cJSON *psc = cJSON_AddObjectToObject(pspec, "securityContext");

	if (nonroot)
		cJSON_AddTrueToObject(psc, "runAsNonRoot");
	cJSON_AddNumberToObject(psc, "runAsUser", uid);
	cJSON_AddNumberToObject(psc, "runAsGroup", uid);
	if (uid != 0)
		cJSON_AddNumberToObject(psc, "fsGroup", uid);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(psc, "seccompProfile"),
	    "type", "RuntimeDefault");
}

/*
 * Label a workload and its pods with the Pod Security level they need
 * (cairn.io/pod-security), and say why when it is not "restricted".
 */
static void
mark_level(cJSON *obj, cJSON *tmpl_md, const char *level, const char *why)
{
	cJSON_AddStringToObject(json_ensure(obj, "metadata.labels"),
	    INSTALL_PSA_LABEL, level);
	cJSON_AddStringToObject(json_ensure(tmpl_md, "labels"),
	    INSTALL_PSA_LABEL, level);
	if (why != NULL)
		cJSON_AddStringToObject(json_ensure(obj, "metadata.annotations"),
		    INSTALL_PSA_LABEL "-reason", why);
}

static void
add_arg(cJSON *args, const char *a)
{
	cJSON_AddItemToArray(args, cJSON_CreateString(a));
}

/*
 * The web endpoint of a container: --listen on the container port "web",
 * the token it requires (--web-token-file, from the Secret mounted by
 * add_token_volume), liveness on /healthz and readiness on /readyz, which
 * answer without the token.
 */
static void
add_web(cJSON *c, cJSON *args)
{
	cJSON *port;
	char listen[64];

	snprintf(listen, sizeof listen, "0.0.0.0:%d", INSTALL_WEB_PORT);
	add_arg(args, "--listen");
	add_arg(args, listen);
	add_arg(args, "--web-token-file");
	add_arg(args, INSTALL_TOKEN_DIR "/" INSTALL_TOKEN_KEY);
	port = cJSON_CreateObject();
	cJSON_AddStringToObject(port, "name", "web");
	cJSON_AddNumberToObject(port, "containerPort", INSTALL_WEB_PORT);
	cJSON_AddStringToObject(port, "protocol", "TCP");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "ports"), port);
	cJSON_AddItemToObject(c, "livenessProbe", probe("/healthz", 5, 10));
	cJSON_AddItemToObject(c, "readinessProbe", probe("/readyz", 2, 5));
}

static void
add_resources(cJSON *c)
{
	cJSON *res = cJSON_AddObjectToObject(c, "resources");
	cJSON *req = cJSON_AddObjectToObject(res, "requests");

	cJSON_AddStringToObject(req, "cpu", "10m");
	cJSON_AddStringToObject(req, "memory", "24Mi");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(res, "limits"),
	    "memory", "64Mi");
}

/*
 * Mount volume name at path; the volume is host directory host (hostPath
 * of type type), or an emptyDir when host is NULL.
 */
static void
add_mount(cJSON *mounts, cJSON *vols, const char *name, const char *host,
	const char *at, const char *type)
{
	cJSON *m = cJSON_CreateObject(), *v = cJSON_CreateObject(), *hp;

	cJSON_AddStringToObject(m, "name", name);
	cJSON_AddStringToObject(m, "mountPath", at);
	cJSON_AddItemToArray(mounts, m);
	cJSON_AddStringToObject(v, "name", name);
	if (host == NULL) {
		cJSON_AddObjectToObject(v, "emptyDir");
	} else {
		hp = cJSON_AddObjectToObject(v, "hostPath");
		cJSON_AddStringToObject(hp, "path", host);
		cJSON_AddStringToObject(hp, "type", type);
	}
	cJSON_AddItemToArray(vols, v);
}

/* The web token Secret, read-only, readable by the owner and the group. */
static void
add_token_volume(cJSON *mounts, cJSON *vols)
{
	cJSON *m = cJSON_CreateObject(), *v = cJSON_CreateObject(), *s;

	cJSON_AddStringToObject(m, "name", "web-token");
	cJSON_AddStringToObject(m, "mountPath", INSTALL_TOKEN_DIR);
	cJSON_AddTrueToObject(m, "readOnly");
	cJSON_AddItemToArray(mounts, m);
	cJSON_AddStringToObject(v, "name", "web-token");
	s = cJSON_AddObjectToObject(v, "secret");
	cJSON_AddStringToObject(s, "secretName", INSTALL_TOKEN_SECRET);
	cJSON_AddNumberToObject(s, "defaultMode", 0440);
	cJSON_AddItemToArray(vols, v);
}

/*
 * The pods roll when the token changes (the servers read it once, at
 * start): its SHA-256, shortened, as an annotation of the template.
 */
static void
add_token_hash(cJSON *tmpl_md, const struct install_opts *o)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[17];

	EVP_Digest(o->web_token, strlen(o->web_token), md, &n, EVP_sha256(),
	    NULL);
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	cJSON_AddStringToObject(json_ensure(tmpl_md, "annotations"),
	    "cairn.io/web-token-sha256", hex);
}

/*
 * The servers: a StatefulSet of --replicas `cairn server` pods, non-root
 * (uid 65532), every capability dropped, read-only root file system,
 * RuntimeDefault seccomp, so that with S3 they pass Pod Security
 * "restricted". The fs provider mounts its directory from the host (a
 * hostPath volume, which only "privileged" allows: baseline forbids
 * hostPath), pins the pod to the node holding it (o->node) and chowns the
 * directory to uid 65532 first in an init container (root with only
 * CHOWN and DAC_OVERRIDE), since the kubelet makes it root-owned.
 */
static void
add_statefulset(cJSON *arr, const struct install_opts *o,
	const cJSON *location)
{
	static const char *const chown_caps[] = { "CHOWN", "DAC_OVERRIDE",
	    NULL };
	cJSON *ss = new_obj(arr, "apps/v1", "StatefulSet", INSTALL_NAME, o->ns);
	cJSON *spec, *sel, *tmpl, *tmd, *pspec, *c, *args, *env, *mounts, *vols;
	cJSON *vct, *pvc, *m;
	char *text, owner[32];
	int fs = strcmp(o->provider, "fs") == 0;

	spec = cJSON_AddObjectToObject(ss, "spec");
	/* The headless Service of the same name gives the pods their DNS. */
	cJSON_AddStringToObject(spec, "serviceName", INSTALL_NAME);
	cJSON_AddNumberToObject(spec, "replicas", o->replicas);
	/* Replicas are peers: start and stop them all at once. */
	cJSON_AddStringToObject(spec, "podManagementPolicy", "Parallel");
	sel = cJSON_AddObjectToObject(spec, "selector");
	cJSON_AddItemToObject(sel, "matchLabels", labels_obj("server"));
	tmpl = cJSON_AddObjectToObject(spec, "template");
	tmd = cJSON_AddObjectToObject(tmpl, "metadata");
	cJSON_AddItemToObject(tmd, "labels", labels_obj("server"));
	mark_level(ss, tmd, fs ? "privileged" : "restricted", fs ?
	    "the fs provider mounts its backup directory from the node "
	    "(hostPath), which only the privileged level allows" : NULL);
	add_token_hash(tmd, o);
	pspec = cJSON_AddObjectToObject(tmpl, "spec");
	cJSON_AddStringToObject(pspec, "serviceAccountName", INSTALL_NAME);
	/* --shutdown-grace (30 s) to reach a checkpoint, plus margin. */
	cJSON_AddNumberToObject(pspec, "terminationGracePeriodSeconds", 45);
	/* fs: the init container is root; the server is checked per container. */
	pod_security(pspec, INSTALL_UID, !fs);
	if (fs && o->node != NULL) {
		cJSON *term = cJSON_CreateObject(), *mf = cJSON_CreateObject();

		cJSON_AddStringToObject(mf, "key", "metadata.name");
		cJSON_AddStringToObject(mf, "operator", "In");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(mf, "values"),
		    cJSON_CreateString(o->node));
		cJSON_AddItemToArray(cJSON_AddArrayToObject(term, "matchFields"),
		    mf);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(
		    cJSON_AddObjectToObject(cJSON_AddObjectToObject(
		    cJSON_AddObjectToObject(pspec, "affinity"), "nodeAffinity"),
		    "requiredDuringSchedulingIgnoredDuringExecution"),
		    "nodeSelectorTerms"), term);
	}
	if (fs) {
		cJSON *ic = cJSON_CreateObject(), *cmdv;

		cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec,
		    "initContainers"), ic);
		cJSON_AddStringToObject(ic, "name", "backups-owner");
		cJSON_AddStringToObject(ic, "image", o->image);
		cJSON_AddStringToObject(ic, "imagePullPolicy", o->pull_policy);
		snprintf(owner, sizeof owner, "%d:%d", INSTALL_UID, INSTALL_UID);
		cmdv = cJSON_AddArrayToObject(ic, "command");
		add_arg(cmdv, "chown");
		add_arg(cmdv, "-R");
		add_arg(cmdv, owner);
		add_arg(cmdv, o->fs_path);
		add_resources(ic);
		cJSON_AddItemToObject(ic, "securityContext",
		    container_security(chown_caps, 0));
		m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "name", "backups");
		cJSON_AddStringToObject(m, "mountPath", o->fs_path);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(ic, "volumeMounts"), m);
	}
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "containers"), c);
	cJSON_AddStringToObject(c, "name", "cairn");
	cJSON_AddStringToObject(c, "image", o->image);
	cJSON_AddStringToObject(c, "imagePullPolicy", o->pull_policy);
	args = cJSON_AddArrayToObject(c, "args");
	add_arg(args, "server");
	add_arg(args, "--namespace");
	add_arg(args, o->ns);
	add_web(c, args);
	add_arg(args, "--journal");
	add_arg(args, INSTALL_JOURNAL_DIR "/journal.db");
	env = cJSON_AddArrayToObject(c, "env");
	cJSON_AddItemToArray(env, env_var("POD_NAME", NULL, "metadata.name"));
	cJSON_AddItemToArray(env, env_var("CAIRN_LOG_FORMAT", "json", NULL));
	/*
	 * The servers create the default location when it is missing, so
	 * that the --dry-run manifest, which cannot hold it (see
	 * cmd_install), still sets up a working cairn.
	 */
	text = cJSON_PrintUnformatted(location);
	cJSON_AddItemToArray(env, env_var("CAIRN_DEFAULT_LOCATION", text, NULL));
	free(text);
	/*
	 * Small on purpose (Velero asks 500m / 128Mi): the server streams
	 * items (memory does not grow with the cluster), so 24Mi covers the
	 * process, libcurl and SQLite's page cache; the 64Mi limit leaves
	 * room for --workers tarball parts being compressed. No CPU limit:
	 * throttling a gzip stream only makes backups slower.
	 */
	add_resources(c);
	cJSON_AddItemToObject(c, "securityContext", container_security(NULL, -1));
	mounts = cJSON_AddArrayToObject(c, "volumeMounts");
	vols = cJSON_AddArrayToObject(pspec, "volumes");
	m = cJSON_CreateObject();
	/* From volumeClaimTemplates below. */
	cJSON_AddStringToObject(m, "name", "journal");
	cJSON_AddStringToObject(m, "mountPath", INSTALL_JOURNAL_DIR);
	cJSON_AddItemToArray(mounts, m);
	add_mount(mounts, vols, "tmp", NULL, "/tmp", NULL);
	add_token_volume(mounts, vols);
	if (fs)
		add_mount(mounts, vols, "backups", o->fs_path, o->fs_path,
		    "DirectoryOrCreate");
	/* One journal per replica: it survives restarts of that replica. */
	vct = cJSON_AddArrayToObject(spec, "volumeClaimTemplates");
	pvc = cJSON_CreateObject();
	cJSON_AddStringToObject(cJSON_AddObjectToObject(pvc, "metadata"), "name",
	    "journal");
	{
		cJSON *ps = cJSON_AddObjectToObject(pvc, "spec");

		cJSON_AddItemToArray(cJSON_AddArrayToObject(ps, "accessModes"),
		    cJSON_CreateString("ReadWriteOnce"));
		cJSON_AddStringToObject(cJSON_AddObjectToObject(
		    cJSON_AddObjectToObject(ps, "resources"), "requests"),
		    "storage", "1Gi");
	}
	cJSON_AddItemToArray(vct, pvc);
}

/*
 * The node-agent: one pod per node claiming the volume work labelled with
 * its node (NODE_NAME from the downward API). Each --volume-dirs
 * directory of the host is mounted at /host<dir> and --volume-root /host
 * maps a PV's hostPath/local path to it. The journal is on the host, so a
 * replaced pod (same --server-id, node-agent-<node>) resumes a copy.
 * Root with only the file capabilities a copy that keeps owners and modes
 * needs, and hostPath volumes: Pod Security "privileged", labelled so.
 * It tolerates every taint, since volume data may live on any node
 * (control-plane nodes included), and is probed like the servers.
 */
static void
add_daemonset(cJSON *arr, const struct install_opts *o)
{
	static const char *const caps[] = { "CHOWN", "DAC_OVERRIDE",
	    "DAC_READ_SEARCH", "FOWNER", "FSETID", NULL };
	cJSON *ds = new_obj(arr, "apps/v1", "DaemonSet", INSTALL_AGENT_NAME,
	    o->ns);
	cJSON *spec, *tmpl, *tmd, *pspec, *c, *args, *env, *mounts, *vols, *tol;
	const char *a[] = { "node-agent", "--namespace", o->ns, "--server-id",
	    "node-agent-$(NODE_NAME)", "--journal",
	    INSTALL_AGENT_DIR "/journal.db", "--volume-root", INSTALL_HOST_ROOT };
	char name[32], *at;

	spec = cJSON_AddObjectToObject(ds, "spec");
	cJSON_AddItemToObject(cJSON_AddObjectToObject(spec, "selector"),
	    "matchLabels", labels_obj("node-agent"));
	tmpl = cJSON_AddObjectToObject(spec, "template");
	tmd = cJSON_AddObjectToObject(tmpl, "metadata");
	cJSON_AddItemToObject(tmd, "labels", labels_obj("node-agent"));
	mark_level(ds, tmd, "privileged", "the node-agent mounts the nodes' "
	    "volume directories and its journal from the node (hostPath) and "
	    "runs as root with CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER "
	    "and FSETID to read and restore any file with its owner and mode");
	add_token_hash(tmd, o);
	pspec = cJSON_AddObjectToObject(tmpl, "spec");
	cJSON_AddStringToObject(pspec, "serviceAccountName", INSTALL_NAME);
	cJSON_AddNumberToObject(pspec, "terminationGracePeriodSeconds", 30);
	pod_security(pspec, 0, 0);
	tol = cJSON_CreateObject();
	cJSON_AddStringToObject(tol, "operator", "Exists");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "tolerations"), tol);
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "containers"), c);
	cJSON_AddStringToObject(c, "name", "node-agent");
	cJSON_AddStringToObject(c, "image", o->image);
	cJSON_AddStringToObject(c, "imagePullPolicy", o->pull_policy);
	args = cJSON_AddArrayToObject(c, "args");
	for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
		add_arg(args, a[i]);
	add_web(c, args);
	env = cJSON_AddArrayToObject(c, "env");
	cJSON_AddItemToArray(env, env_var("NODE_NAME", NULL, "spec.nodeName"));
	cJSON_AddItemToArray(env, env_var("POD_NAME", NULL, "metadata.name"));
	cJSON_AddItemToArray(env, env_var("CAIRN_LOG_FORMAT", "json", NULL));
	/* As the server: streams, small; no CPU limit on a copy. */
	add_resources(c);
	cJSON_AddItemToObject(c, "securityContext", container_security(caps, 0));
	mounts = cJSON_AddArrayToObject(c, "volumeMounts");
	vols = cJSON_AddArrayToObject(pspec, "volumes");
	add_mount(mounts, vols, "journal", INSTALL_AGENT_DIR, INSTALL_AGENT_DIR,
	    "DirectoryOrCreate");
	add_mount(mounts, vols, "tmp", NULL, "/tmp", NULL);
	add_token_volume(mounts, vols);
	for (size_t i = 0; o->volume_dirs[i] != NULL; i++) {
		snprintf(name, sizeof name, "volumes-%zu", i);
		at = xasprintf(INSTALL_HOST_ROOT "%s", o->volume_dirs[i]);
		add_mount(mounts, vols, name, o->volume_dirs[i], at,
		    "DirectoryOrCreate");
		free(at);
	}
}

/* The default BackupStorageLocation's spec from the flags. Owned. */
static cJSON *
location_spec(const struct install_opts *o, struct cairn_err *err)
{
	cJSON *spec, *cfg;

	spec = cli_location_spec(o->provider, o->bucket, o->prefix, o->config,
	    o->cred_b64 != NULL ? INSTALL_CRED_SECRET : NULL, INSTALL_CRED_KEY,
	    1, err);
	if (spec == NULL)
		return NULL;
	cfg = cJSON_GetObjectItemCaseSensitive(spec, "config");
	if (strcmp(o->provider, "fs") == 0 &&
	    cJSON_GetObjectItemCaseSensitive(cfg, "path") == NULL)
		cJSON_AddStringToObject(cfg, "path", o->fs_path);
	cJSON_AddStringToObject(spec, "backupSyncPeriod", "1m");
	cJSON_AddStringToObject(spec, "validationFrequency", "1m");
	if (o->enc_key_id != NULL) {
		cJSON *e = cJSON_AddObjectToObject(spec, "encryption");

		cJSON_AddStringToObject(e, "keyID", o->enc_key_id);
		cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "secretRef"),
		    "name", INSTALL_ENC_SECRET);
	} else if (o->enc_kept != NULL) {
		cJSON_AddItemToObject(spec, "encryption",
		    cJSON_Duplicate(o->enc_kept, 1));
	}
	return spec;
}

static int
build_objects(const struct install_opts *o, cJSON *arr, struct cairn_err *err)
{
	cJSON *obj, *spec, *svc, *port;
	int rc;

	new_obj(arr, "v1", "Namespace", o->ns, NULL);
	for (size_t i = 0; install_crd_yaml[i] != NULL; i++) {
		rc = codec_yaml_stream(install_crd_yaml[i],
		    strlen(install_crd_yaml[i]), CODEC_YAML_TYPED,
		    install_crd_files[i], arr, err);
		if (rc < 0)
			return rc;
	}
	/* Label the CRDs so that they can be selected (-l) on their own. */
	cJSON_ArrayForEach(obj, arr) {
		cJSON *l;

		if (strcmp(json_str_or(obj, "kind", ""),
		    "CustomResourceDefinition") != 0)
			continue;
		l = json_ensure(obj, "metadata.labels");
		cJSON_DeleteItemFromObjectCaseSensitive(l,
		    "app.kubernetes.io/component");
		cJSON_AddStringToObject(l, "app.kubernetes.io/component", "crd");
	}
	new_obj(arr, "v1", "ServiceAccount", INSTALL_NAME, o->ns);
	add_rules(new_obj(arr, "rbac.authorization.k8s.io/v1", "ClusterRole",
	    INSTALL_NAME, NULL), RBAC_CLUSTER);
	add_binding(arr, "ClusterRoleBinding", "ClusterRole", NULL, o->ns);
	add_rules(new_obj(arr, "rbac.authorization.k8s.io/v1", "Role",
	    INSTALL_NAME, o->ns), RBAC_NAMESPACE);
	add_binding(arr, "RoleBinding", "Role", o->ns, o->ns);
	if (o->cred_b64 != NULL) {
		obj = new_obj(arr, "v1", "Secret", INSTALL_CRED_SECRET, o->ns);
		cJSON_AddStringToObject(obj, "type", "Opaque");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(obj, "data"),
		    INSTALL_CRED_KEY, o->cred_b64);
	}
	if (o->enc_data != NULL) {
		obj = new_obj(arr, "v1", "Secret", INSTALL_ENC_SECRET, o->ns);
		cJSON_AddStringToObject(json_get(obj, "metadata.labels"),
		    "app.kubernetes.io/component", "encryption-keys");
		cJSON_AddStringToObject(obj, "type", "Opaque");
		cJSON_AddItemToObject(obj, "data", cJSON_Duplicate(o->enc_data,
		    1));
	}
	obj = new_obj(arr, "v1", "Secret", INSTALL_TOKEN_SECRET, o->ns);
	cJSON_AddStringToObject(json_get(obj, "metadata.labels"),
	    "app.kubernetes.io/component", "web-token");
	cJSON_AddStringToObject(obj, "type", "Opaque");
	{
		char *b64 = codec_b64_encode(o->web_token, strlen(o->web_token));

		cJSON_AddStringToObject(cJSON_AddObjectToObject(obj, "data"),
		    INSTALL_TOKEN_KEY, b64);
		free(b64);
	}

	spec = location_spec(o, err);
	if (spec == NULL)
		return CAIRN_EINVAL;
	obj = new_obj(arr, "cairn.io/v1", "BackupStorageLocation",
	    INSTALL_BSL_NAME, o->ns);
	cJSON_AddItemToObject(obj, "spec", spec);

	add_statefulset(arr, o, spec);
	if (o->node_agent)
		add_daemonset(arr, o);

	/*
	 * Headless: the StatefulSet's serviceName (a DNS name per pod) and
	 * one address per server for Prometheus, whose /metrics are each
	 * server's own; kubectl port-forward picks one of them.
	 */
	svc = new_obj(arr, "v1", "Service", INSTALL_NAME, o->ns);
	spec = cJSON_AddObjectToObject(svc, "spec");
	cJSON_AddStringToObject(spec, "type", "ClusterIP");
	cJSON_AddStringToObject(spec, "clusterIP", "None");
	cJSON_AddItemToObject(spec, "selector", labels_obj("server"));
	port = cJSON_CreateObject();
	cJSON_AddStringToObject(port, "name", "web");
	cJSON_AddNumberToObject(port, "port", INSTALL_WEB_PORT);
	cJSON_AddStringToObject(port, "targetPort", "web");
	cJSON_AddStringToObject(port, "protocol", "TCP");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "ports"), port);
	return 0;
}

/* A new web token: INSTALL_TOKEN_BYTES random bytes in hex. Owned. */
static char *
new_token(struct cairn_err *err)
{
	unsigned char raw[INSTALL_TOKEN_BYTES];
	char *hex = xmalloc(2 * sizeof raw + 1);

	if (RAND_bytes(raw, (int)sizeof raw) != 1) {
		free(hex);
		cairn_err_set(err, CAIRN_EFAIL, "no random bytes for the web "
		    "token (OpenSSL RAND_bytes failed)");
		return NULL;
	}
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof raw);
	return hex;
}

/* Options shared by install and uninstall. */
static int
opts_from_flags(const struct cli_command *cmd, const struct flagset *fs,
	struct install_opts *o, char **image_owned, int installing)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const char *cred;

	memset(o, 0, sizeof *o);
	o->ns = flag_str(fs, F_NAMESPACE);
	o->image = flag_str(fs, F_IMAGE);
	if (o->image == NULL || o->image[0] == '\0') {
		*image_owned = xstrdup("cairn:" PACKAGE_VERSION);
		o->image = *image_owned;
	}
	o->pull_policy = flag_str(fs, F_IMAGE_PULL_POLICY);
	if (o->pull_policy == NULL)
		o->pull_policy = "IfNotPresent";
	if (strcmp(o->pull_policy, "Always") != 0 &&
	    strcmp(o->pull_policy, "IfNotPresent") != 0 &&
	    strcmp(o->pull_policy, "Never") != 0)
		return cli_usage_error(cmd, "--image-pull-policy must be Always, "
		    "IfNotPresent or Never");
	o->provider = flag_str(fs, F_PROVIDER);
	if (o->provider == NULL || o->provider[0] == '\0')
		o->provider = "fs";
	if (strcmp(o->provider, "aws") == 0)
		o->provider = "s3";
	if (strcmp(o->provider, "fs") != 0 && strcmp(o->provider, "s3") != 0)
		return cli_usage_error(cmd, "--provider must be fs or s3");
	/*
	 * Shared storage: two servers, so that one takes over when the
	 * other's node goes. A local directory is on one node's disk: a
	 * second server on another node could not see the parts of a backup
	 * it takes over, so there is one, pinned to that node.
	 */
	o->replicas = strcmp(o->provider, "fs") == 0 ? 1 : 2;
	if (flag_given(fs, F_REPLICAS))
		o->replicas = (int)flag_int(fs, F_REPLICAS);
	if (installing && (o->replicas < 1 || o->replicas > 100))
		return cli_usage_error(cmd, "--replicas must be 1..100");
	if (installing && o->replicas > 1 && strcmp(o->provider, "fs") == 0)
		return cli_usage_error(cmd, "--replicas %d: local-directory "
		    "storage (--provider fs) keeps the backups on one node's "
		    "disk, where a server on another node could neither see "
		    "them nor resume the backups it takes over, so it runs "
		    "exactly 1 server; use --provider s3 (shared storage) for "
		    "more", o->replicas);
	if (flag_str(fs, F_NODE) != NULL) {
		if (flag_str(fs, F_NODE)[0] == '\0' ||
		    strcmp(o->provider, "fs") != 0)
			return cli_usage_error(cmd, "--node NODE is for "
			    "--provider fs: the node whose disk holds the "
			    "backups");
		o->node = xstrdup(flag_str(fs, F_NODE));
	}
	o->bucket = flag_str(fs, F_BUCKET);
	if (strcmp(o->provider, "s3") == 0 &&
	    (o->bucket == NULL || o->bucket[0] == '\0'))
		return cli_usage_error(cmd, "--provider s3 needs --bucket");
	o->prefix = flag_str(fs, F_PREFIX);
	o->config = flag_list(fs, F_CONFIG);
	o->fs_path = INSTALL_FS_PATH;
	for (size_t i = 0; o->config[i] != NULL; i++)
		if (strncmp(o->config[i], "path=", 5) == 0)
			o->fs_path = o->config[i] + 5;
	if (o->fs_path[0] != '/')
		return cli_usage_error(cmd, "--config path= must be absolute");
	/* uninstall removes the DaemonSet whether or not install made it. */
	o->node_agent = !installing || flag_bool(fs, F_USE_NODE_AGENT);
	o->volume_dirs = flag_list(fs, F_VOLUME_DIRS);
	for (size_t i = 0; o->volume_dirs[i] != NULL; i++)
		if (o->volume_dirs[i][0] != '/' ||
		    strstr(o->volume_dirs[i], "..") != NULL)
			return cli_usage_error(cmd, "--volume-dirs: \"%s\" is "
			    "not an absolute path", o->volume_dirs[i]);
	cred = flag_str(fs, F_CREDENTIAL_FILE);
	if (installing && cred != NULL) {
		char *text;
		size_t len;

		if (buf_read_file(cred, INSTALL_CRED_MAX, "--credential-file",
		    &text, &len, &err) < 0)
			return cli_usage_error(cmd, "%s", err.msg);
		o->cred_b64 = codec_b64_encode(text, len);
		free(text);
	}
	if (installing && (flag_given(fs, F_ENCRYPTION_KEY_FILE) ||
	    flag_bool(fs, F_ENCRYPT))) {
		unsigned char key[CRYPT_KEY_LEN];
		char *text = NULL, *b64;
		size_t len = 0;

		o->enc_key_id = flag_str(fs, F_ENCRYPTION_KEY_ID);
		if (!crypt_keyid_ok(o->enc_key_id))
			return cli_usage_error(cmd, "--encryption-key-id must be 1 "
			    "to %d of A-Z a-z 0-9 . _ -", CRYPT_KEYID_MAX);
		if (flag_given(fs, F_ENCRYPTION_KEY_FILE) && flag_bool(fs, F_ENCRYPT))
			return cli_usage_error(cmd, "--encrypt generates a key; "
			    "with --encryption-key-file the file's key is used");
		if (flag_bool(fs, F_ENCRYPT)) {
			o->enc_generated = 1;
			if (RAND_bytes(key, (int)sizeof key) != 1)
				return cli_fail("no random bytes for a key "
				    "(OpenSSL RAND_bytes failed)");
		} else if (buf_read_file(flag_str(fs, F_ENCRYPTION_KEY_FILE), 4096,
		    "--encryption-key-file", &text, &len, &err) < 0 ||
		    crypt_key_parse(text, len, "--encryption-key-file", key,
		    &err) < 0) {
			if (text != NULL)
				explicit_bzero(text, len);
			free(text);
			return cli_usage_error(cmd, "%s", err.msg);
		}
		if (text != NULL)
			explicit_bzero(text, len);
		free(text);
		b64 = codec_b64_encode(key, sizeof key);
		explicit_bzero(key, sizeof key);
		o->enc_data = cJSON_CreateObject();
		cJSON_AddStringToObject(o->enc_data, o->enc_key_id, b64);
		explicit_bzero(b64, strlen(b64));
		free(b64);
	}
	if (installing && flag_str(fs, F_WEB_TOKEN_FILE) != NULL) {
		if (web_token_read(flag_str(fs, F_WEB_TOKEN_FILE), &o->web_token,
		    &err) < 0)
			return cli_usage_error(cmd, "%s", err.msg);
	} else if (installing) {
		o->web_token = new_token(&err);
		if (o->web_token == NULL)
			return cli_fail("%s", err.msg);
	} else {
		o->web_token = xstrdup("");
	}
	return 0;
}

/* Free what opts_from_flags() allocated. */
static void
opts_free(struct install_opts *o)
{
	free(o->cred_b64);
	cJSON_Delete(o->enc_data);
	cJSON_Delete(o->enc_kept);
	free(o->node);
	if (o->web_token != NULL)
		explicit_bzero(o->web_token, strlen(o->web_token));
	free(o->web_token);
}

/* ---- applying ---------------------------------------------------------- */

/*
 * Merge desired into live (both objects): maps key by key, lists of equal
 * length element by element, anything else replaced.
 */
static void
merge_into(cJSON *live, const cJSON *desired)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, desired) {
		cJSON *l = cJSON_GetObjectItemCaseSensitive(live, d->string);

		if (l != NULL && cJSON_IsObject(l) && cJSON_IsObject(d)) {
			merge_into(l, d);
			continue;
		}
		if (l != NULL && cJSON_IsArray(l) && cJSON_IsArray(d) &&
		    cJSON_GetArraySize(l) == cJSON_GetArraySize(d)) {
			cJSON *le = l->child;
			const cJSON *de = d->child;
			int same_shape = 1;

			for (; le != NULL && de != NULL; le = le->next,
			    de = de->next)
				if (cJSON_IsObject(le) != cJSON_IsObject(de))
					same_shape = 0;
			if (same_shape) {
				le = l->child;
				for (de = d->child; de != NULL; de = de->next) {
					cJSON *next = le->next;

					if (cJSON_IsObject(de))
						merge_into(le, de);
					else
						cJSON_ReplaceItemViaPointer(l, le,
						    cJSON_Duplicate(de, 1));
					le = next;
				}
				continue;
			}
		}
		if (l != NULL)
			cJSON_ReplaceItemInObjectCaseSensitive(live, d->string,
			    cJSON_Duplicate(d, 1));
		else
			cJSON_AddItemToObject(live, d->string,
			    cJSON_Duplicate(d, 1));
	}
}

static int
obj_gvr(const cJSON *obj, struct kube_gvr *g, const char **ns,
	struct cairn_err *err)
{
	const struct kind_info *ki = kind_find(json_str(obj, "kind"));

	if (ki == NULL)
		return cairn_err_set(err, CAIRN_EINVAL, "unknown kind %s",
		    json_str_or(obj, "kind", "?"));
	*g = KUBE_GVR(ki->group, ki->version, ki->resource);
	*ns = ki->namespaced ? json_str(obj, "metadata.namespace") : NULL;
	return 0;
}

/*
 * Would the API server let the pods of workload obj (a StatefulSet or
 * DaemonSet) run? Asked before the workload is written, with a dry-run
 * create of a Pod made from its template as the controller makes it (the
 * StatefulSet's claim volumes included): admission, Pod Security above
 * all, answers as it would for the real pods, with the namespace's labels
 * and the cluster's defaults. 0: admitted, or not known (the check itself
 * failed for another reason, e.g. no permission to create pods: noted on
 * stderr); CAIRN_EAUTH with err saying what to change when Pod Security
 * refuses the pods.
 */
static int
check_admission(struct kube *k, const struct install_opts *o,
	const cJSON *obj, struct cairn_err *err)
{
	struct cairn_err e = CAIRN_ERR_INIT;
	const char *kind = json_str_or(obj, "kind", "");
	const char *name = json_str_or(obj, "metadata.name", "");
	const cJSON *pvc;
	cJSON *pod, *md, *vols;
	char *body, *path, *full;
	int rc, agent = strcmp(kind, "DaemonSet") == 0;

	pod = cJSON_CreateObject();
	cJSON_AddStringToObject(pod, "apiVersion", "v1");
	cJSON_AddStringToObject(pod, "kind", "Pod");
	md = cJSON_AddObjectToObject(pod, "metadata");
	body = xasprintf("%s-", name);
	cJSON_AddStringToObject(md, "generateName", body);
	free(body);
	cJSON_AddStringToObject(md, "namespace", o->ns);
	cJSON_AddItemToObject(md, "labels", cJSON_Duplicate(
	    json_get(obj, "spec.template.metadata.labels"), 1));
	cJSON_AddItemToObject(pod, "spec", cJSON_Duplicate(
	    json_get(obj, "spec.template.spec"), 1));
	vols = json_get(pod, "spec.volumes");
	if (vols == NULL)
		vols = cJSON_AddArrayToObject(json_get(pod, "spec"), "volumes");
	cJSON_ArrayForEach(pvc, json_get(obj, "spec.volumeClaimTemplates")) {
		cJSON *v = cJSON_CreateObject();
		const char *claim = json_str_or(pvc, "metadata.name", "");
		char *cn = xasprintf("%s-%s-0", claim, name);

		cJSON_AddStringToObject(v, "name", claim);
		cJSON_AddStringToObject(cJSON_AddObjectToObject(v,
		    "persistentVolumeClaim"), "claimName", cn);
		cJSON_AddItemToArray(vols, v);
		free(cn);
	}
	body = json_print(pod);
	cJSON_Delete(pod);
	path = kube_path(&KUBE_GVR("", "v1", "pods"), o->ns, NULL, NULL);
	full = xasprintf("%s?dryRun=All", path);
	rc = kube_request(k, "POST", full, NULL, body, strlen(body), 1, NULL,
	    &e);
	free(full);
	free(path);
	free(body);
	if (rc == 0)
		return 0;
	if (kube_last_status()->http != 403 ||
	    strstr(e.msg, "PodSecurity") == NULL) {
		fprintf(stderr, "note: could not check whether namespace %s "
		    "admits the pods of %s (%s); going on\n", o->ns, name, e.msg);
		return 0;
	}
	if (agent)
		return cairn_err_set(err, CAIRN_EAUTH, "namespace %s refuses "
		    "the node-agent's pods: %s\nThe node-agent mounts the "
		    "nodes' volume directories (hostPath) and runs as root "
		    "with file capabilities, which only the \"privileged\" Pod "
		    "Security level allows. Label the namespace "
		    "(kubectl label namespace %s "
		    "pod-security.kubernetes.io/enforce=privileged --overwrite) "
		    "and run cairn install again, or install without "
		    "--use-node-agent.", o->ns, e.msg, o->ns);
	if (strcmp(o->provider, "fs") == 0)
		return cairn_err_set(err, CAIRN_EAUTH, "namespace %s refuses "
		    "cairn's server pods: %s\nLocal-directory storage "
		    "(--provider fs) mounts the node's directory %s (a hostPath "
		    "volume), which only the \"privileged\" Pod Security level "
		    "allows: \"baseline\" and \"restricted\" forbid hostPath. "
		    "Label the namespace (kubectl label namespace %s "
		    "pod-security.kubernetes.io/enforce=privileged --overwrite) "
		    "and run cairn install again, or use --provider s3, whose "
		    "servers pass \"restricted\".", o->ns, e.msg, o->fs_path,
		    o->ns);
	return cairn_err_set(err, CAIRN_EAUTH, "namespace %s refuses cairn's "
	    "server pods: %s", o->ns, e.msg);
}

/*
 * Keep the token of an existing cairn-web-token Secret when it is a valid
 * token: a re-run changes nothing, and whoever holds the token (people,
 * Prometheus) keeps it.
 */
static void
reuse_token(struct kube *k, struct install_opts *o)
{
	cJSON *sec = NULL;
	const char *b64;
	char *raw = NULL;
	size_t n = 0;

	if (kube_get(k, &KUBE_GVR("", "v1", "secrets"), o->ns,
	    INSTALL_TOKEN_SECRET, &sec, NULL) < 0)
		return;
	b64 = json_str(sec, "data." INSTALL_TOKEN_KEY);
	if (b64 != NULL && codec_b64_decode(b64, WEB_CAP_TOKEN, &raw, &n) == 0) {
		int ok = n > 0;

		for (size_t i = 0; i < n; i++)
			if ((unsigned char)raw[i] <= ' ' ||
			    (unsigned char)raw[i] >= 0x7f)
				ok = 0;
		if (ok) {
			explicit_bzero(o->web_token, strlen(o->web_token));
			free(o->web_token);
			o->web_token = xstrdup(raw);
		}
		explicit_bzero(raw, n);
	}
	free(raw);
	cJSON_Delete(sec);
}

/*
 * A re-run keeps what encryption there is: without an encryption flag the
 * location keeps its spec.encryption; with one, the keys already in the
 * Secret stay beside the new one (older backups need them), a generated
 * key is not generated again for an id the Secret has, and a key file
 * whose id already names another key is refused (rotate to a new id).
 */
static int
reuse_encryption(struct kube *k, struct install_opts *o,
	struct cairn_err *err)
{
	cJSON *obj = NULL;
	const cJSON *it, *have;

	if (o->enc_data == NULL) {
		if (kube_get(k, &KUBE_GVR("cairn.io", "v1",
		    "backupstoragelocations"), o->ns, INSTALL_BSL_NAME, &obj,
		    NULL) == 0 && json_get(obj, "spec.encryption") != NULL)
			o->enc_kept = cJSON_Duplicate(json_get(obj,
			    "spec.encryption"), 1);
		cJSON_Delete(obj);
		return 0;
	}
	if (kube_get(k, &KUBE_GVR("", "v1", "secrets"), o->ns,
	    INSTALL_ENC_SECRET, &obj, NULL) < 0)
		return 0;
	have = json_get(obj, "data");
	cJSON_ArrayForEach(it, have) {
		const cJSON *mine = cJSON_GetObjectItemCaseSensitive(o->enc_data,
		    it->string);

		if (!cJSON_IsString(it))
			continue;
		if (mine == NULL) {
			cJSON_AddStringToObject(o->enc_data, it->string,
			    it->valuestring);
		} else if (o->enc_generated) {
			cJSON_ReplaceItemInObjectCaseSensitive(o->enc_data,
			    it->string, cJSON_CreateString(it->valuestring));
			o->enc_generated = 0;	/* nothing new to save */
		} else if (strcmp(mine->valuestring, it->valuestring) != 0) {
			cairn_err_set(err, CAIRN_EINVAL, "Secret %s/%s already "
			    "holds another key under id %s: give the new key a "
			    "new --encryption-key-id (older backups keep reading "
			    "with the old one)", o->ns, INSTALL_ENC_SECRET,
			    it->string);
			cJSON_Delete(obj);
			return CAIRN_EINVAL;
		}
	}
	cJSON_Delete(obj);
	return 0;
}

/*
 * fs without --node: the node the installed server is pinned to, else
 * the cluster's only node. Several nodes and no pin yet: refused, since
 * the backups would land on whichever node the pod happens to run on.
 * Nodes that cannot be listed (no permission): not pinned.
 */
static int
pick_node(struct kube *k, struct install_opts *o, struct cairn_err *err)
{
	cJSON *ss = NULL, *list = NULL;
	const cJSON *t, *mf, *items;
	int n;

	if (kube_get(k, &KUBE_GVR("apps", "v1", "statefulsets"), o->ns,
	    INSTALL_NAME, &ss, NULL) == 0) {
		cJSON_ArrayForEach(t, json_get(ss, "spec.template.spec.affinity."
		    "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
		    "nodeSelectorTerms"))
			cJSON_ArrayForEach(mf, json_get(t, "matchFields"))
				if (o->node == NULL && strcmp(json_str_or(mf,
				    "key", ""), "metadata.name") == 0 &&
				    cJSON_IsString(cJSON_GetArrayItem(json_get(mf,
				    "values"), 0)))
					o->node = xstrdup(cJSON_GetArrayItem(
					    json_get(mf, "values"), 0)->valuestring);
		cJSON_Delete(ss);
		if (o->node != NULL)
			return 0;
	}
	if (kube_request(k, "GET", "/api/v1/nodes?limit=2", NULL, NULL, 0, 1,
	    &list, NULL) < 0)
		return 0;
	items = json_get(list, "items");
	n = cJSON_GetArraySize(items);
	if (n == 1)
		o->node = xstrdup(json_str_or(cJSON_GetArrayItem(items, 0),
		    "metadata.name", ""));
	cJSON_Delete(list);
	if (n > 1)
		return cairn_err_set(err, CAIRN_EINVAL, "local-directory storage "
		    "(--provider fs) keeps the backups in %s on one node's disk "
		    "and this cluster has several nodes: pass --node NAME, the "
		    "node that is to hold them (kubectl get nodes), or use "
		    "--provider s3", o->fs_path);
	return 0;
}

/*
 * Apply one object; *what gets "created", "configured", "replaced" or
 * "unchanged". A workload is written only once its pods are known to be
 * admitted (check_admission), and then with its pod spec as desired, so
 * that fields install no longer sets go. A Service whose clusterIP must
 * change (it cannot be updated) is deleted and created again.
 */
static int
apply_one(struct kube *k, const struct install_opts *o, const cJSON *obj,
	const char **what, struct cairn_err *err)
{
	struct kube_gvr g;
	const char *ns, *name = json_str_or(obj, "metadata.name", "");
	const char *kind = json_str_or(obj, "kind", "");
	cJSON *live = NULL, *merged = NULL;
	int rc, workload = json_get(obj, "spec.template.spec") != NULL;

	rc = obj_gvr(obj, &g, &ns, err);
	if (rc < 0)
		return rc;
	rc = kube_get(k, &g, ns, name, &live, err);
	if (rc == CAIRN_ENOTFOUND) {
		if (workload && check_admission(k, o, obj, err) < 0)
			return err->code;
		rc = kube_create(k, &g, ns, obj, NULL, err);
		*what = "created";
		return rc;
	}
	if (rc < 0)
		return rc;
	if (strcmp(kind, "Service") == 0 && json_str(live, "spec.clusterIP") &&
	    strcmp(json_str_or(live, "spec.clusterIP", ""),
	    json_str_or(obj, "spec.clusterIP", "")) != 0) {
		struct kube_delete_opts d;

		cJSON_Delete(live);
		memset(&d, 0, sizeof d);
		rc = kube_delete(k, &g, ns, name, &d, NULL, err);
		if (rc < 0 && rc != CAIRN_ENOTFOUND)
			return rc;
		*what = "replaced";
		return kube_create(k, &g, ns, obj, NULL, err);
	}
	merged = cJSON_Duplicate(live, 1);
	merge_into(merged, obj);
	if (cJSON_Compare(merged, live, 1)) {
		*what = "unchanged";
		rc = 0;
	} else if (workload && check_admission(k, o, obj, err) < 0) {
		rc = err->code;
	} else {
		if (workload)
			cJSON_ReplaceItemInObjectCaseSensitive(json_get(merged,
			    "spec.template"), "spec", cJSON_Duplicate(
			    json_get(obj, "spec.template.spec"), 1));
		/* merged carries the live resourceVersion: a race is a 409. */
		rc = kube_update(k, &g, ns, merged, NULL, err);
		*what = "configured";
	}
	cJSON_Delete(live);
	cJSON_Delete(merged);
	return rc;
}

static int
crd_established(struct kube *k, const char *name)
{
	cJSON *crd = NULL, *c;
	int ok = 0;

	if (kube_get(k, &KUBE_GVR("apiextensions.k8s.io", "v1",
	    "customresourcedefinitions"), NULL, name, &crd, NULL) < 0)
		return 0;
	cJSON_ArrayForEach(c, json_get(crd, "status.conditions")) {
		if (strcmp(json_str_or(c, "type", ""), "Established") == 0 &&
		    strcmp(json_str_or(c, "status", ""), "True") == 0)
			ok = 1;
	}
	cJSON_Delete(crd);
	return ok;
}

/* Wait until every CRD in objs is Established. */
static int
wait_crds(struct kube *k, const cJSON *objs, int64_t timeout_us,
	struct cairn_err *err)
{
	int64_t end = time_mono_us() + timeout_us;
	const cJSON *o;

	cJSON_ArrayForEach(o, objs) {
		const char *name = json_str_or(o, "metadata.name", "");

		if (strcmp(json_str_or(o, "kind", ""),
		    "CustomResourceDefinition") != 0)
			continue;
		while (!crd_established(k, name)) {
			if (time_mono_us() > end)
				return cairn_err_set(err, CAIRN_ETIMEOUT,
				    "CRD %s not Established after %llds", name,
				    (long long)(timeout_us / TIME_US_PER_SEC));
			time_sleep_us(200000, NULL);
		}
	}
	return 0;
}

static void
describe_obj(const cJSON *o, char *out, size_t len)
{
	const struct kind_info *ki = kind_find(json_str(o, "kind"));
	const char *res = ki != NULL ? ki->resource : json_str_or(o, "kind", "?");
	const char *grp = ki != NULL ? ki->group : "";

	snprintf(out, len, "%s%s%s/%s", res, grp[0] ? "." : "", grp,
	    json_str_or(o, "metadata.name", "?"));
}

static int
print_objects(const cJSON *objs, enum out_format fmt)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	const cJSON *o;

	if (fmt == OUT_JSON) {
		cJSON *list = cJSON_CreateObject();

		cJSON_AddStringToObject(list, "apiVersion", "v1");
		cJSON_AddStringToObject(list, "kind", "List");
		cJSON_AddItemToObject(list, "items", cJSON_Duplicate(objs, 1));
		cJSON_AddObjectToObject(list, "metadata");
		if (out_print_doc(stdout, OUT_JSON, list, &err) < 0) {
			cJSON_Delete(list);
			return cli_fail("%s", err.msg);
		}
		cJSON_Delete(list);
		return CLI_EXIT_OK;
	}
	cJSON_ArrayForEach(o, objs) {
		fputs("---\n", stdout);
		if (out_print_doc(stdout, OUT_YAML, o, &err) < 0)
			return cli_fail("%s", err.msg);
	}
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int
cmd_install(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct install_opts o;
	struct kube *k = NULL;
	cJSON *objs = NULL;
	const cJSON *obj;
	char *image = NULL, desc[300];
	enum out_format fmt = OUT_YAML;
	int rc, crds_waited = 0, changed = 0, fs_provider;
	int dry_run = flag_bool(fs, F_DRY_RUN);

	if (fs->nargs > 0)
		return cli_usage_error(cmd, "unexpected argument \"%s\"",
		    fs->args[0]);
	rc = opts_from_flags(cmd, fs, &o, &image, 1);
	if (rc != 0)
		goto out;
	fs_provider = strcmp(o.provider, "fs") == 0;
	if (flag_given(fs, F_OUTPUT) && strcmp(flag_str(fs, F_OUTPUT), "table")
	    != 0 && out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0) {
		rc = cli_usage_error(cmd, "%s", err.msg);
		goto out;
	}
	if (!dry_run) {
		if (kube_open_flags(fs, &k, &err) < 0) {
			rc = cli_fail("%s", err.msg);
			goto out;
		}
		if (flag_str(fs, F_WEB_TOKEN_FILE) == NULL)
			reuse_token(k, &o);
		if (reuse_encryption(k, &o, &err) < 0) {
			rc = cli_usage_error(cmd, "%s", err.msg);
			goto out;
		}
		if (fs_provider && o.node == NULL && pick_node(k, &o, &err) < 0) {
			rc = cli_usage_error(cmd, "%s", err.msg);
			goto out;
		}
	} else if (fs_provider && o.node == NULL) {
		fprintf(stderr, "note: the server is not pinned to a node (no "
		    "--node): with local-directory storage on a cluster of "
		    "several nodes, pass --node NAME, the node whose %s is to "
		    "hold the backups\n", o.fs_path);
	}
	objs = cJSON_CreateArray();
	if (build_objects(&o, objs, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (flag_str(fs, F_SELECTOR) != NULL) {
		struct kube_selector *sel = NULL;
		cJSON *it, *next;

		if (kube_selector_parse(flag_str(fs, F_SELECTOR), &sel, &err) < 0) {
			rc = cli_usage_error(cmd, "--selector: %s", err.msg);
			goto out;
		}
		for (it = objs->child; it != NULL; it = next) {
			next = it->next;
			if (!kube_selector_match_object(sel, it))
				cJSON_Delete(cJSON_DetachItemViaPointer(objs, it));
		}
		kube_selector_free(sel);
	}
	if (dry_run) {
		/*
		 * kubectl maps every kind of a stream before it creates
		 * anything, so a custom resource cannot come in the same
		 * stream as its CRD on a fresh cluster. The manifest leaves
		 * the location out; the servers create it from their
		 * CAIRN_DEFAULT_LOCATION (the same spec) when they start.
		 */
		for (cJSON *it = objs->child, *next; it != NULL; it = next) {
			next = it->next;
			if (strcmp(json_str_or(it, "kind", ""),
			    "BackupStorageLocation") == 0)
				cJSON_Delete(cJSON_DetachItemViaPointer(objs, it));
		}
		rc = print_objects(objs, fmt);
		goto out;
	}
	rc = CLI_EXIT_OK;
	cJSON_ArrayForEach(obj, objs) {
		const char *what = "";
		const char *kind = json_str_or(obj, "kind", "");

		/* Custom resources need their CRDs served first. */
		if (!crds_waited && strcmp(kind, "BackupStorageLocation") == 0) {
			if (wait_crds(k, objs, INSTALL_WAIT_US, &err) < 0) {
				rc = cli_fail("%s", err.msg);
				goto out;
			}
			crds_waited = 1;
		}
		describe_obj(obj, desc, sizeof desc);
		if (apply_one(k, &o, obj, &what, &err) < 0) {
			rc = cli_fail("%s: %s", desc, err.msg);
			goto out;
		}
		if (strcmp(what, "unchanged") != 0)
			changed++;
		printf("%s %s\n", desc, what);
	}
	if (flag_bool(fs, F_WAIT) && !crds_waited &&
	    wait_crds(k, objs, INSTALL_WAIT_US, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	if (changed == 0)
		printf("cairn is installed in namespace %s; nothing changed.\n",
		    o.ns);
	else
		printf("cairn installed in namespace %s (%d objects created or "
		    "updated).\n", o.ns, changed);
	printf("The web endpoint (/status, /status.json, /metrics) needs the "
	    "token of Secret %s:\n  kubectl -n %s get secret %s -o "
	    "jsonpath='{.data.%s}' | base64 -d\n", INSTALL_TOKEN_SECRET, o.ns,
	    INSTALL_TOKEN_SECRET, INSTALL_TOKEN_KEY);
	if (o.enc_data != NULL)
		printf("Backups are encrypted with key %s of Secret %s. %sWithout "
		    "the key no backup can be read: keep a copy outside the "
		    "cluster:\n  kubectl -n %s get secret %s -o "
		    "jsonpath='{.data.%s}' | base64 -d > %s.key\n",
		    o.enc_key_id, INSTALL_ENC_SECRET, o.enc_generated ?
		    "The key was just generated. " : "", o.ns,
		    INSTALL_ENC_SECRET, o.enc_key_id, o.enc_key_id);
out:
	cJSON_Delete(objs);
	opts_free(&o);
	free(image);
	kube_free(k);
	return rc;
}

/* ---- uninstall ---------------------------------------------------------- */

static int
delete_obj(struct kube *k, const cJSON *obj, struct cairn_err *err)
{
	struct kube_gvr g;
	const char *ns;
	struct kube_delete_opts d;
	int rc;

	rc = obj_gvr(obj, &g, &ns, err);
	if (rc < 0)
		return rc;
	memset(&d, 0, sizeof d);
	d.propagation = "Background";
	return kube_delete(k, &g, ns, json_str_or(obj, "metadata.name", ""), &d,
	    NULL, err);
}

/* Wait until no cairn server pod is left (they may be cleaning storage). */
static int
wait_pods_gone(struct kube *k, const char *ns, struct cairn_err *err)
{
	int64_t end = time_mono_us() + 2 * INSTALL_WAIT_US;

	for (;;) {
		cJSON *list = NULL;
		char *path = kube_path(&KUBE_GVR("", "v1", "pods"), ns, NULL, NULL);
		char *full = xasprintf("%s?labelSelector=%s", path,
		    "app.kubernetes.io%2Fname%3Dcairn");
		int rc, n;

		rc = kube_request(k, "GET", full, NULL, NULL, 0, 1, &list, err);
		free(path);
		free(full);
		if (rc == CAIRN_ENOTFOUND)
			return 0;
		if (rc < 0)
			return rc;
		n = cJSON_GetArraySize(json_get(list, "items"));
		cJSON_Delete(list);
		if (n == 0)
			return 0;
		if (time_mono_us() > end)
			return cairn_err_set(err, CAIRN_ETIMEOUT, "%d cairn pods "
			    "still running in %s", n, ns);
		time_sleep_us(500000, NULL);
	}
}

struct strip_ctx {
	struct kube *k;
	const char *ns;
	int failed;
};

static int
strip_finalizer(void *arg, cJSON *item)
{
	struct strip_ctx *c = arg;
	const cJSON *f;
	cJSON *keep = cJSON_CreateArray(), *patch = cJSON_CreateObject(), *md;
	char *text;
	int found = 0;

	cJSON_ArrayForEach(f, json_get(item, "metadata.finalizers")) {
		if (cJSON_IsString(f) && strcmp(f->valuestring,
		    INSTALL_FINALIZER) == 0)
			found = 1;
		else
			cJSON_AddItemToArray(keep, cJSON_Duplicate(f, 1));
	}
	md = cJSON_AddObjectToObject(patch, "metadata");
	cJSON_AddItemToObject(md, "finalizers", keep);
	cJSON_AddStringToObject(md, "resourceVersion",
	    json_str_or(item, "metadata.resourceVersion", ""));
	text = json_print(patch);
	cJSON_Delete(patch);
	if (found && kube_patch(c->k, &KUBE_GVR("cairn.io", "v1", "backups"),
	    c->ns, json_str_or(item, "metadata.name", ""), NULL,
	    KUBE_PATCH_MERGE, text, NULL, NULL) < 0)
		c->failed++;
	free(text);
	return 0;
}

/*
 * Where the default location keeps the backups, for uninstall to say
 * that they stay: "s3://bucket/prefix", "directory D on node N" (the node
 * the server was pinned to). Owned.
 */
static char *
describe_storage(struct kube *k, const char *ns)
{
	cJSON *bsl = NULL, *ss = NULL;
	const cJSON *v;
	const char *node = NULL;
	char *out;

	if (kube_get(k, &KUBE_GVR("cairn.io", "v1", "backupstoragelocations"),
	    ns, INSTALL_BSL_NAME, &bsl, NULL) < 0)
		return xstrdup("wherever the storage locations point");
	if (strcmp(json_str_or(bsl, "spec.provider", ""), "fs") != 0) {
		const char *prefix = json_str_or(bsl, "spec.objectStorage.prefix",
		    "");

		out = xasprintf("s3://%s%s%s", json_str_or(bsl,
		    "spec.objectStorage.bucket", "?"), prefix[0] ? "/" : "",
		    prefix);
		cJSON_Delete(bsl);
		return out;
	}
	if (kube_get(k, &KUBE_GVR("apps", "v1", "statefulsets"), ns,
	    INSTALL_NAME, &ss, NULL) == 0) {
		v = json_get(ss, "spec.template.spec.affinity.nodeAffinity."
		    "requiredDuringSchedulingIgnoredDuringExecution."
		    "nodeSelectorTerms");
		v = cJSON_GetArrayItem(json_get(cJSON_GetArrayItem(v, 0),
		    "matchFields"), 0);
		v = cJSON_GetArrayItem(json_get(v, "values"), 0);
		if (cJSON_IsString(v))
			node = v->valuestring;
	}
	out = xasprintf("directory %s on %s%s", json_str_or(bsl,
	    "spec.config.path", INSTALL_FS_PATH), node != NULL ? "node " :
	    "the node the server ran on", node != NULL ? node : "");
	cJSON_Delete(ss);
	cJSON_Delete(bsl);
	return out;
}

int
cmd_uninstall(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct install_opts o;
	struct kube *k = NULL;
	cJSON *objs = NULL;
	char *image = NULL, desc[300], *where = NULL;
	int purge = flag_bool(fs, F_PURGE), rc, n;

	if (fs->nargs > 0)
		return cli_usage_error(cmd, "unexpected argument \"%s\"",
		    fs->args[0]);
	rc = opts_from_flags(cmd, fs, &o, &image, 0);
	if (rc != 0)
		goto out;
	objs = cJSON_CreateArray();
	if (build_objects(&o, objs, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	/* install's Secret exists whether or not the flag is given now. */
	if (o.cred_b64 == NULL)
		(void)new_obj(objs, "v1", "Secret", INSTALL_CRED_SECRET, o.ns);
	if (kube_open_flags(fs, &k, &err) < 0) {
		rc = cli_fail("%s", err.msg);
		goto out;
	}
	where = describe_storage(k, o.ns);
	rc = CLI_EXIT_OK;
	/* Servers first: nothing may act on the deletions that follow. */
	n = cJSON_GetArraySize(objs);
	for (int i = n - 1; i >= 0; i--) {
		const cJSON *obj = cJSON_GetArrayItem(objs, i);
		const char *kind = json_str_or(obj, "kind", "");
		int r;

		if (!purge && (strcmp(kind, "Namespace") == 0 ||
		    strcmp(kind, "CustomResourceDefinition") == 0))
			continue;
		if (strcmp(kind, "Namespace") == 0 ||
		    strcmp(kind, "CustomResourceDefinition") == 0) {
			/* Reached only with --purge, after the servers went. */
			struct strip_ctx sc = { k, o.ns, 0 };

			if (strcmp(kind, "CustomResourceDefinition") == 0 &&
			    strcmp(json_str_or(obj, "metadata.name", ""),
			    "backups.cairn.io") == 0) {
				r = kube_list(k, &KUBE_GVR("cairn.io", "v1",
				    "backups"), o.ns, NULL, strip_finalizer, &sc,
				    NULL, &err);
				if ((r < 0 && r != CAIRN_ENOTFOUND) || sc.failed) {
					rc = cli_fail("removing the cleanup "
					    "finalizers from Backups in %s: %s; "
					    "CRDs kept", o.ns, r < 0 ? err.msg :
					    "some patches failed");
					goto out;
				}
			}
		}
		describe_obj(obj, desc, sizeof desc);
		r = delete_obj(k, obj, &err);
		if (r == CAIRN_ENOTFOUND)
			printf("%s not found\n", desc);
		else if (r < 0) {
			rc = cli_fail("%s: %s", desc, err.msg);
			goto out;
		} else
			printf("%s deleted\n", desc);
		if (strcmp(kind, "StatefulSet") == 0 &&
		    wait_pods_gone(k, o.ns, &err) < 0) {
			rc = cli_fail("%s", err.msg);
			goto out;
		}
	}
	if (purge)
		printf("cairn removed, with its CRDs and namespace %s (the "
		    "servers' journal volumes with it).\nKept:\n", o.ns);
	else
		printf("cairn removed from namespace %s.\nKept:\n"
		    "  - the CRDs, namespace %s and its Backups, Restores and "
		    "Schedules: a reinstall picks them up (--purge removes them)\n"
		    "  - the servers' journals, PersistentVolumeClaims "
		    "journal-%s-N in %s: a reinstall resumes their work "
		    "(--purge removes them with the namespace)\n", o.ns, o.ns,
		    INSTALL_NAME, o.ns);
	printf("  - the backups in storage, %s: cairn never deletes them on "
	    "uninstall\n  - Secret %s/%s, if any: the keys encrypted backups "
	    "need\n  - on the nodes, the node-agent journals in %s, if "
	    "it ran (remove by hand)\n", where, o.ns, INSTALL_ENC_SECRET,
	    INSTALL_AGENT_DIR);
out:
	cJSON_Delete(objs);
	opts_free(&o);
	free(where);
	free(image);
	kube_free(k);
	return rc;
}

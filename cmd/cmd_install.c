/*
 * cmd_install.c: `cairn install` and `cairn uninstall`.
 *
 * install builds the whole set of objects in memory (cJSON), in the order
 * they must exist: the namespace, the CRDs (the YAML of schema/crds/,
 * embedded at build time by schema/install/embed.sh and read with
 * libyaml), the ServiceAccount, the RBAC rules of schema/install/rbac.def,
 * the credentials Secret, the default BackupStorageLocation, the
 * StatefulSet of `cairn server --listen` replicas (liveness on /healthz,
 * readiness on /readyz), with --use-node-agent the DaemonSet of `cairn
 * node-agent` (off by default: one more pod on every node, needed only
 * for volume data bound to a node), and the Service of the web endpoint.
 * --dry-run prints them (-o yaml: a multi-document stream for
 * `kubectl apply -f -`; -o json: a v1 List) except the location, which
 * kubectl could not apply in one stream with its CRD: the servers create
 * it at start from the same spec (CAIRN_DEFAULT_LOCATION in the
 * StatefulSet, `cairn server --default-location`). Otherwise each object is
 * applied in turn: created when missing; when present, the desired object
 * is merged into the live one (maps merged key by key, lists of the same
 * length element by element, other values replaced) and written back with
 * the live resourceVersion only if that changed anything, so fields the
 * API server filled in (a Service's clusterIP, defaults) are kept and a
 * second run reports every object "unchanged" and writes nothing.
 *
 * uninstall stops the servers first (StatefulSet, then it waits for their
 * pods to go), then removes the Service, RBAC, ServiceAccount, credentials
 * Secret and the BackupStorageLocation object. Storage is never touched.
 * The CRDs, the namespace and the Backups/Restores/Schedules are kept
 * unless --purge: the record of every backup stays in the cluster, as
 * Velero keeps its CRs, and a reinstall picks them up. With --purge the
 * Backups' cleanup finalizers are removed before the objects go, so that
 * deleting them can never delete the backups in storage.
 */
#include "config.h"
#include "cmd/cli.h"

#include <errno.h>
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
#include "kube/kube.h"

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
	int replicas;
	const char *provider;		/* "fs" or the flag */
	const char *bucket;
	const char *prefix;
	char **config;			/* K=V */
	const char *fs_path;		/* fs: directory on the node */
	char *cred_b64;			/* owned, NULL: no Secret */
	int node_agent;			/* add the node-agent DaemonSet */
	char **volume_dirs;		/* host directories it mounts */
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

static void
add_statefulset(cJSON *arr, const struct install_opts *o,
	const cJSON *location)
{
	cJSON *ss = new_obj(arr, "apps/v1", "StatefulSet", INSTALL_NAME, o->ns);
	cJSON *spec, *sel, *tmpl, *tmd, *pspec, *c, *args, *env, *ports, *port;
	cJSON *res, *req, *lim, *mounts, *m, *vols, *v, *sc, *psc, *vct, *pvc;
	char listen[64], *text;
	int fs = strcmp(o->provider, "fs") == 0;

	spec = cJSON_AddObjectToObject(ss, "spec");
	cJSON_AddStringToObject(spec, "serviceName", INSTALL_NAME);
	cJSON_AddNumberToObject(spec, "replicas", o->replicas);
	/* Replicas are peers: start and stop them all at once. */
	cJSON_AddStringToObject(spec, "podManagementPolicy", "Parallel");
	sel = cJSON_AddObjectToObject(spec, "selector");
	cJSON_AddItemToObject(sel, "matchLabels", labels_obj("server"));
	tmpl = cJSON_AddObjectToObject(spec, "template");
	tmd = cJSON_AddObjectToObject(tmpl, "metadata");
	cJSON_AddItemToObject(tmd, "labels", labels_obj("server"));
	pspec = cJSON_AddObjectToObject(tmpl, "spec");
	cJSON_AddStringToObject(pspec, "serviceAccountName", INSTALL_NAME);
	/* --shutdown-grace (30 s) to reach a checkpoint, plus margin. */
	cJSON_AddNumberToObject(pspec, "terminationGracePeriodSeconds", 45);
	psc = cJSON_AddObjectToObject(pspec, "securityContext");
	if (fs) {
		/* A hostPath directory is made root-owned by the kubelet. */
		cJSON_AddNumberToObject(psc, "runAsUser", 0);
	} else {
		cJSON_AddTrueToObject(psc, "runAsNonRoot");
		cJSON_AddNumberToObject(psc, "runAsUser", 65532);
		cJSON_AddNumberToObject(psc, "fsGroup", 65532);
	}
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "containers"), c);
	cJSON_AddStringToObject(c, "name", "cairn");
	cJSON_AddStringToObject(c, "image", o->image);
	cJSON_AddStringToObject(c, "imagePullPolicy", "IfNotPresent");
	args = cJSON_AddArrayToObject(c, "args");
	snprintf(listen, sizeof listen, "0.0.0.0:%d", INSTALL_WEB_PORT);
	{
		const char *a[] = { "server", "--namespace", o->ns, "--listen",
		    listen, "--journal", INSTALL_JOURNAL_DIR "/journal.db" };

		for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
			cJSON_AddItemToArray(args, cJSON_CreateString(a[i]));
	}
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
	ports = cJSON_AddArrayToObject(c, "ports");
	port = cJSON_CreateObject();
	cJSON_AddStringToObject(port, "name", "web");
	cJSON_AddNumberToObject(port, "containerPort", INSTALL_WEB_PORT);
	cJSON_AddStringToObject(port, "protocol", "TCP");
	cJSON_AddItemToArray(ports, port);
	cJSON_AddItemToObject(c, "livenessProbe", probe("/healthz", 5, 10));
	cJSON_AddItemToObject(c, "readinessProbe", probe("/readyz", 2, 5));
	/*
	 * Small on purpose (Velero asks 500m / 128Mi): the server streams
	 * items (memory does not grow with the cluster), so 24Mi covers the
	 * process, libcurl and SQLite's page cache; the 64Mi limit leaves
	 * room for --workers tarball parts being compressed. No CPU limit:
	 * throttling a gzip stream only makes backups slower.
	 */
	res = cJSON_AddObjectToObject(c, "resources");
	req = cJSON_AddObjectToObject(res, "requests");
	cJSON_AddStringToObject(req, "cpu", "10m");
	cJSON_AddStringToObject(req, "memory", "24Mi");
	lim = cJSON_AddObjectToObject(res, "limits");
	cJSON_AddStringToObject(lim, "memory", "64Mi");
	sc = cJSON_AddObjectToObject(c, "securityContext");
	cJSON_AddFalseToObject(sc, "allowPrivilegeEscalation");
	cJSON_AddTrueToObject(sc, "readOnlyRootFilesystem");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(
	    cJSON_AddObjectToObject(sc, "capabilities"), "drop"),
	    cJSON_CreateString("ALL"));
	mounts = cJSON_AddArrayToObject(c, "volumeMounts");
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "name", "journal");
	cJSON_AddStringToObject(m, "mountPath", INSTALL_JOURNAL_DIR);
	cJSON_AddItemToArray(mounts, m);
	m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "name", "tmp");
	cJSON_AddStringToObject(m, "mountPath", "/tmp");
	cJSON_AddItemToArray(mounts, m);
	vols = cJSON_AddArrayToObject(pspec, "volumes");
	v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "name", "tmp");
	cJSON_AddObjectToObject(v, "emptyDir");
	cJSON_AddItemToArray(vols, v);
	if (fs) {
		cJSON *hp;

		m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "name", "backups");
		cJSON_AddStringToObject(m, "mountPath", o->fs_path);
		cJSON_AddItemToArray(mounts, m);
		v = cJSON_CreateObject();
		cJSON_AddStringToObject(v, "name", "backups");
		hp = cJSON_AddObjectToObject(v, "hostPath");
		cJSON_AddStringToObject(hp, "path", o->fs_path);
		cJSON_AddStringToObject(hp, "type", "DirectoryOrCreate");
		cJSON_AddItemToArray(vols, v);
	}
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

/*
 * The node-agent: one pod per node claiming the volume work labelled with
 * its node (NODE_NAME from the downward API). Each --volume-dirs
 * directory of the host is mounted at /host<dir> and --volume-root /host
 * maps a PV's hostPath/local path to it. The journal is on the host, so a
 * replaced pod (same --server-id, node-agent-<node>) resumes a copy.
 * Root with only the file capabilities a copy that keeps owners and modes
 * needs.
 */
static void
add_daemonset(cJSON *arr, const struct install_opts *o)
{
	cJSON *ds = new_obj(arr, "apps/v1", "DaemonSet", INSTALL_AGENT_NAME,
	    o->ns);
	cJSON *spec, *tmpl, *pspec, *c, *args, *env, *res, *sc, *caps, *mounts;
	cJSON *vols;
	const char *a[] = { "node-agent", "--namespace", o->ns, "--server-id",
	    "node-agent-$(NODE_NAME)", "--journal",
	    INSTALL_AGENT_DIR "/journal.db", "--volume-root", INSTALL_HOST_ROOT };
	const char *add[] = { "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH",
	    "FOWNER", "FSETID" };
	char name[32], *at;

	spec = cJSON_AddObjectToObject(ds, "spec");
	cJSON_AddItemToObject(cJSON_AddObjectToObject(spec, "selector"),
	    "matchLabels", labels_obj("node-agent"));
	tmpl = cJSON_AddObjectToObject(spec, "template");
	cJSON_AddItemToObject(cJSON_AddObjectToObject(tmpl, "metadata"),
	    "labels", labels_obj("node-agent"));
	pspec = cJSON_AddObjectToObject(tmpl, "spec");
	cJSON_AddStringToObject(pspec, "serviceAccountName", INSTALL_NAME);
	cJSON_AddNumberToObject(pspec, "terminationGracePeriodSeconds", 30);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(pspec,
	    "securityContext"), "runAsUser", 0);
	c = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "containers"), c);
	cJSON_AddStringToObject(c, "name", "node-agent");
	cJSON_AddStringToObject(c, "image", o->image);
	cJSON_AddStringToObject(c, "imagePullPolicy", "IfNotPresent");
	args = cJSON_AddArrayToObject(c, "args");
	for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
		cJSON_AddItemToArray(args, cJSON_CreateString(a[i]));
	env = cJSON_AddArrayToObject(c, "env");
	cJSON_AddItemToArray(env, env_var("NODE_NAME", NULL, "spec.nodeName"));
	cJSON_AddItemToArray(env, env_var("POD_NAME", NULL, "metadata.name"));
	cJSON_AddItemToArray(env, env_var("CAIRN_LOG_FORMAT", "json", NULL));
	/* As the server: streams, small; no CPU limit on a copy. */
	res = cJSON_AddObjectToObject(c, "resources");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(res, "requests"),
	    "memory", "24Mi");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(res, "limits"),
	    "memory", "64Mi");
	cJSON_AddStringToObject(json_ensure(res, "requests"), "cpu", "10m");
	sc = cJSON_AddObjectToObject(c, "securityContext");
	cJSON_AddFalseToObject(sc, "allowPrivilegeEscalation");
	cJSON_AddTrueToObject(sc, "readOnlyRootFilesystem");
	caps = cJSON_AddObjectToObject(sc, "capabilities");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(caps, "drop"),
	    cJSON_CreateString("ALL"));
	cJSON_AddArrayToObject(caps, "add");
	for (size_t i = 0; i < sizeof add / sizeof add[0]; i++)
		cJSON_AddItemToArray(json_get(caps, "add"),
		    cJSON_CreateString(add[i]));
	mounts = cJSON_AddArrayToObject(c, "volumeMounts");
	vols = cJSON_AddArrayToObject(pspec, "volumes");
	add_mount(mounts, vols, "journal", INSTALL_AGENT_DIR, INSTALL_AGENT_DIR,
	    "DirectoryOrCreate");
	add_mount(mounts, vols, "tmp", NULL, "/tmp", NULL);
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

	spec = location_spec(o, err);
	if (spec == NULL)
		return CAIRN_EINVAL;
	obj = new_obj(arr, "cairn.io/v1", "BackupStorageLocation",
	    INSTALL_BSL_NAME, o->ns);
	cJSON_AddItemToObject(obj, "spec", spec);

	add_statefulset(arr, o, spec);
	if (o->node_agent)
		add_daemonset(arr, o);

	svc = new_obj(arr, "v1", "Service", INSTALL_NAME, o->ns);
	spec = cJSON_AddObjectToObject(svc, "spec");
	cJSON_AddStringToObject(spec, "type", "ClusterIP");
	cJSON_AddItemToObject(spec, "selector", labels_obj("server"));
	port = cJSON_CreateObject();
	cJSON_AddStringToObject(port, "name", "web");
	cJSON_AddNumberToObject(port, "port", INSTALL_WEB_PORT);
	cJSON_AddStringToObject(port, "targetPort", "web");
	cJSON_AddStringToObject(port, "protocol", "TCP");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "ports"), port);
	return 0;
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
	o->replicas = (int)flag_int(fs, F_REPLICAS);
	if (installing && (o->replicas < 1 || o->replicas > 100))
		return cli_usage_error(cmd, "--replicas must be 1..100");
	o->image = flag_str(fs, F_IMAGE);
	if (o->image == NULL || o->image[0] == '\0') {
		*image_owned = xstrdup("cairn:" PACKAGE_VERSION);
		o->image = *image_owned;
	}
	o->provider = flag_str(fs, F_PROVIDER);
	if (o->provider == NULL || o->provider[0] == '\0')
		o->provider = "fs";
	if (strcmp(o->provider, "aws") == 0)
		o->provider = "s3";
	if (strcmp(o->provider, "fs") != 0 && strcmp(o->provider, "s3") != 0)
		return cli_usage_error(cmd, "--provider must be fs or s3");
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
	return 0;
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

/* Apply one object; *what gets "created", "configured" or "unchanged". */
static int
apply_one(struct kube *k, const cJSON *obj, const char **what,
	struct cairn_err *err)
{
	struct kube_gvr g;
	const char *ns, *name = json_str_or(obj, "metadata.name", "");
	cJSON *live = NULL, *merged = NULL;
	int rc;

	rc = obj_gvr(obj, &g, &ns, err);
	if (rc < 0)
		return rc;
	rc = kube_get(k, &g, ns, name, &live, err);
	if (rc == CAIRN_ENOTFOUND) {
		rc = kube_create(k, &g, ns, obj, NULL, err);
		*what = "created";
		return rc;
	}
	if (rc < 0)
		return rc;
	merged = cJSON_Duplicate(live, 1);
	merge_into(merged, obj);
	if (cJSON_Compare(merged, live, 1)) {
		*what = "unchanged";
		rc = 0;
	} else {
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
	int rc, crds_waited = 0, changed = 0;

	if (fs->nargs > 0)
		return cli_usage_error(cmd, "unexpected argument \"%s\"",
		    fs->args[0]);
	rc = opts_from_flags(cmd, fs, &o, &image, 1);
	if (rc != 0)
		goto out;
	if (flag_given(fs, F_OUTPUT) && strcmp(flag_str(fs, F_OUTPUT), "table")
	    != 0 && out_parse_format(flag_str(fs, F_OUTPUT), &fmt, &err) < 0) {
		rc = cli_usage_error(cmd, "%s", err.msg);
		goto out;
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
	if (flag_bool(fs, F_DRY_RUN)) {
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
	if (kube_open_flags(fs, &k, &err) < 0) {
		rc = cli_fail("%s", err.msg);
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
		if (apply_one(k, obj, &what, &err) < 0) {
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
out:
	cJSON_Delete(objs);
	free(o.cred_b64);
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

int
cmd_uninstall(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct install_opts o;
	struct kube *k = NULL;
	cJSON *objs = NULL;
	char *image = NULL, desc[300];
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
		printf("cairn removed, with its CRDs and namespace %s; backups "
		    "in storage are kept.\n", o.ns);
	else
		printf("cairn removed from namespace %s; the CRDs, the namespace, "
		    "Backups, Restores and Schedules are kept (--purge removes "
		    "them), and backups in storage are kept.\n", o.ns);
out:
	cJSON_Delete(objs);
	free(o.cred_b64);
	free(image);
	kube_free(k);
	return rc;
}

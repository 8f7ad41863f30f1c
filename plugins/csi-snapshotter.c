/*
 * csi-snapshotter: cairn's CSI snapshot plugin (protocol 2; the protocol
 * and this plugin in docs/plugins.md).
 *
 * Backup: for a CSI volume whose StorageClass's provisioner has a
 * VolumeSnapshotClass (same driver), create a snapshot.storage.k8s.io/v1
 * VolumeSnapshot of its claim, report progress from the snapshot's status
 * (restoreSize as the total, done once readyToUse; status.error fails the
 * operation), record the snapshot handle and what restores need in the
 * properties, then keep only the VolumeSnapshotContent (deletionPolicy set
 * to Retain, the VolumeSnapshot deleted): the snapshot then belongs to the
 * backup, not to the application's namespace.
 * Restore: a pre-provisioned VolumeSnapshotContent for the handle
 * (deletionPolicy Retain) and a VolumeSnapshot bound to it in the target
 * claim's namespace; once ready, the answer names it as the claim's
 * dataSource and cairn creates the claim, which the CSI driver provisions
 * from the snapshot.
 * Delete: the backup's VolumeSnapshotContent gets back the deletion
 * policy its class gave it, and is deleted: with Delete the driver
 * deletes the snapshot, with Retain only the object goes (as for any
 * VolumeSnapshotContent).
 *
 * It holds no credentials: every API call is a "kube" line that cairn
 * makes on its behalf, within the operation's scope. Its hello says
 * "nodeLocal": false, so any cairn server runs its work.
 *
 * Settings (csi-snapshotter.json next to it, all optional):
 * volumeSnapshotClass (force a class), readyTimeout (default 10m; a
 * Backup's spec.csiSnapshotTimeout wins), pollInterval (default 500ms).
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/util.h"

#define LINE_MAX_BYTES	(2u << 20)
#define SNAP_API	"/apis/snapshot.storage.k8s.io/v1"
#define ANN_DEFAULT	"snapshot.storage.kubernetes.io/is-default-class"
#define ANN_CLASS	"cairn.io/volume-snapshot-class"
#define NAME_MAX_LEN	253

static int64_t ready_timeout_ms = 600000, poll_ms = 500;

/* ---- the channel to cairn ---------------------------------------------- */

static void
say(cJSON *o)
{
	char *t = json_print(o);

	printf("%s\n", t);
	fflush(stdout);
	free(t);
	cJSON_Delete(o);
}

static void fail(const char *fmt, ...) CAIRN_PRINTF(1, 2);

/* An error answer: the operation fails with this message. */
static void
fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	cJSON *o = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(o, "type", "error");
	cJSON_AddStringToObject(o, "message", msg);
	say(o);
	exit(0);
}

/* One line from cairn (stdin), parsed; NULL at EOF. */
static cJSON *
read_line(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, stdin);
	cJSON *o;

	if (n <= 0) {
		free(line);
		return NULL;
	}
	if ((size_t)n > LINE_MAX_BYTES)
		fail("cairn sent a line over %u bytes", LINE_MAX_BYTES);
	o = json_parse(line, (size_t)n, NULL);
	free(line);
	if (!cJSON_IsObject(o))
		fail("cairn sent a line that is not a JSON object");
	return o;
}

/*
 * An API call through cairn: the reply's body (owned, may be NULL) and
 * *status (HTTP code; 403 when cairn refused it).
 */
static cJSON *
kube(const char *method, const char *path, const cJSON *body, int *status)
{
	static int next_id;
	cJSON *o = cJSON_CreateObject(), *r, *b;
	int id = ++next_id;

	cJSON_AddStringToObject(o, "type", "kube");
	cJSON_AddNumberToObject(o, "id", id);
	cJSON_AddStringToObject(o, "method", method);
	cJSON_AddStringToObject(o, "path", path);
	if (body != NULL)
		cJSON_AddItemToObject(o, "body", cJSON_Duplicate(body, 1));
	say(o);
	for (;;) {
		r = read_line();
		if (r == NULL)
			fail("cairn closed the channel during %s %s", method, path);
		if (strcmp(json_str_or(r, "type", ""), "kube-response") == 0 &&
		    json_int(r, "id", -1) == id)
			break;
		cJSON_Delete(r);
	}
	*status = (int)json_int(r, "status", 500);
	b = cJSON_DetachItemFromObject(r, "body");
	cJSON_Delete(r);
	if (cJSON_IsNull(b)) {
		cJSON_Delete(b);
		b = NULL;
	}
	return b;
}

/* The API server's message of a failed call, for errors. */
static const char *
why(const cJSON *body)
{
	return json_str_or(body, "message", "no message");
}

static void
progress(uint64_t done, uint64_t total)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "type", "progress");
	cJSON_AddNumberToObject(o, "bytesDone", (double)done);
	cJSON_AddNumberToObject(o, "totalBytes", (double)total);
	say(o);
}

/* ---- small helpers ------------------------------------------------------ */

/* "10m", "1h30m", "45s", "500ms" -> ms; -1 when not a duration. */
static int64_t
duration_ms(const char *s)
{
	int64_t total = 0, n;
	char *end;

	if (s == NULL || *s == '\0')
		return -1;
	while (*s != '\0') {
		n = strtoll(s, &end, 10);
		if (end == s || n < 0)
			return -1;
		s = end;
		if (strncmp(s, "ms", 2) == 0) {
			total += n;
			s += 2;
		} else if (*s == 'h') {
			total += n * 3600000;
			s++;
		} else if (*s == 'm') {
			total += n * 60000;
			s++;
		} else if (*s == 's') {
			total += n * 1000;
			s++;
		} else {
			return -1;
		}
	}
	return total;
}

static void
sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "<a>-<b>" as an object name, hashed to fit when longer than 253. Owned. */
static char *
obj_name(const char *a, const char *b)
{
	char *n = xasprintf("%s-%s", a, b), *h;
	uint64_t x = 1469598103934665603ULL;

	if (strlen(n) <= NAME_MAX_LEN)
		return n;
	for (const char *p = n; *p; p++)
		x = (x ^ (unsigned char)*p) * 1099511628211ULL;
	n[NAME_MAX_LEN - 17] = '\0';
	h = xasprintf("%s-%016llx", n, (unsigned long long)x);
	free(n);
	return h;
}

static const char *
ann(const cJSON *o, const char *key)
{
	const cJSON *a = json_get(o, "metadata.annotations");
	const cJSON *v = a ? cJSON_GetObjectItemCaseSensitive(a, key) : NULL;

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void
property(cJSON *props, const char *k, const char *v)
{
	if (v != NULL)
		cJSON_AddStringToObject(props, k, v);
}

/* ---- backup -------------------------------------------------------------- */

/*
 * The VolumeSnapshotClass for driver: the claim's annotation or the
 * configured one when set, else the class of that driver marked default,
 * else its only class. Owned name.
 */
static char *
pick_class(const cJSON *req, const char *driver, const char *scname)
{
	const char *want = ann(json_get(req, "persistentVolumeClaim"), ANN_CLASS);
	const cJSON *it, *def = NULL, *only = NULL;
	char names[512] = "";
	cJSON *list;
	int st, n = 0;

	if (want == NULL)
		want = json_str(req, "config.volumeSnapshotClass");
	if (want != NULL)
		return xstrdup(want);
	list = kube("GET", SNAP_API "/volumesnapshotclasses", NULL, &st);
	if (st != 200)
		fail("listing VolumeSnapshotClasses: %d %s", st, why(list));
	cJSON_ArrayForEach(it, json_get(list, "items")) {
		if (strcmp(json_str_or(it, "driver", ""), driver) != 0)
			continue;
		n++;
		only = it;
		if (strlen(names) + 80 < sizeof names)
			snprintf(names + strlen(names), sizeof names -
			    strlen(names), "%s%s", names[0] ? ", " : "",
			    json_str_or(it, "metadata.name", "?"));
		if (def == NULL && ann(it, ANN_DEFAULT) != NULL &&
		    strcmp(ann(it, ANN_DEFAULT), "true") == 0)
			def = it;
	}
	if (def == NULL && n == 1)
		def = only;
	if (def == NULL) {
		if (n == 0)
			fail("no VolumeSnapshotClass has driver %s (storage class "
			    "%s): this volume cannot be snapshotted", driver,
			    scname ? scname : "(none)");
		fail("%d VolumeSnapshotClasses have driver %s (%s) and none is "
		    "marked %s=true: annotate the claim with %s", n, driver,
		    names, ANN_DEFAULT, ANN_CLASS);
	}
	{
		char *r = xstrdup(json_str_or(def, "metadata.name", ""));

		cJSON_Delete(list);
		return r;
	}
}

/*
 * Wait for VolumeSnapshot ns/name to be ready, reporting progress (total:
 * its restoreSize, else fallback). Returns it (owned).
 */
static cJSON *
wait_ready(const char *ns, const char *name, uint64_t fallback, int cleanup)
{
	char *path = xasprintf(SNAP_API "/namespaces/%s/volumesnapshots/%s",
	    ns, name);
	int64_t start = now_ms();
	uint64_t total = fallback;
	cJSON *vs;
	int st;

	for (;;) {
		vs = kube("GET", path, NULL, &st);
		if (st != 200)
			fail("reading VolumeSnapshot %s/%s: %d %s", ns, name, st,
			    why(vs));
		if (json_str(vs, "status.restoreSize") != NULL)
			(void)str_parse_quantity(json_str(vs,
			    "status.restoreSize"), &total);
		if (json_str(vs, "status.error.message") != NULL) {
			char msg[600];

			snprintf(msg, sizeof msg, "%s", json_str(vs,
			    "status.error.message"));
			if (cleanup)
				cJSON_Delete(kube("DELETE", path, NULL, &st));
			fail("VolumeSnapshot %s/%s failed: %s", ns, name, msg);
		}
		if (cJSON_IsTrue(json_get(vs, "status.readyToUse"))) {
			progress(total, total);
			free(path);
			return vs;
		}
		progress(0, total);
		cJSON_Delete(vs);
		if (now_ms() - start > ready_timeout_ms) {
			if (cleanup)
				cJSON_Delete(kube("DELETE", path, NULL, &st));
			fail("VolumeSnapshot %s/%s was not ready within %lld s",
			    ns, name, (long long)(ready_timeout_ms / 1000));
		}
		sleep_ms(poll_ms);
	}
}

/* A snapshot.storage.k8s.io/v1 object of kind, named name (in ns). Owned. */
static cJSON *
snap_object(const char *kind, const char *ns, const char *name,
    const char *cls)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "apiVersion", "snapshot.storage.k8s.io/v1");
	cJSON_AddStringToObject(o, "kind", kind);
	json_set_str(o, "metadata.name", name);
	if (ns != NULL)
		json_set_str(o, "metadata.namespace", ns);
	if (cls != NULL)
		json_set_str(o, "spec.volumeSnapshotClassName", cls);
	return o;
}

/* Create VolumeSnapshot body in ns, or find the one of that name. Owned. */
static cJSON *
create_or_get(const char *path, const char *name, cJSON *body)
{
	char *one = xasprintf("%s/%s", path, name);
	cJSON *r;
	int st;

	r = kube("POST", path, body, &st);
	if (st == 409) {
		cJSON_Delete(r);
		r = kube("GET", one, NULL, &st);
	}
	if (st / 100 != 2)
		fail("creating %s: %d %s", one, st, why(r));
	free(one);
	cJSON_Delete(body);
	return r;
}

static void
do_backup(const cJSON *req)
{
	const cJSON *pv = json_get(req, "persistentVolume");
	const cJSON *pvc = json_get(req, "persistentVolumeClaim");
	const cJSON *sc = json_get(req, "storageClass");
	const char *driver = json_str(pv, "spec.csi.driver");
	const char *ns = json_str(pvc, "metadata.namespace");
	const char *claim = json_str(pvc, "metadata.name");
	const char *prov = json_str(sc, "provisioner");
	const char *bname = json_str_or(req, "backupName", "");
	char *cls, *name, *path, *vsc_path;
	cJSON *body, *vs, *vsc, *props, *res;
	uint64_t fallback = 0;
	int st;

	if (driver == NULL)
		fail("volume %s is not a CSI volume", json_str_or(req,
		    "volumeName", "?"));
	if (ns == NULL || claim == NULL)
		fail("volume %s has no claim to snapshot", json_str_or(req,
		    "volumeName", "?"));
	if (prov != NULL && strcmp(prov, driver) != 0)
		fail("storage class %s provisions with %s, the volume's driver is "
		    "%s", json_str_or(sc, "metadata.name", "?"), prov, driver);
	(void)str_parse_quantity(json_str(pvc, "spec.resources.requests.storage"),
	    &fallback);
	cls = pick_class(req, driver, json_str(sc, "metadata.name"));
	name = obj_name("cairn", bname[0] ? bname : "backup");
	{
		char *n2 = obj_name(name, claim);

		free(name);
		name = n2;
	}
	path = xasprintf(SNAP_API "/namespaces/%s/volumesnapshots", ns);
	body = snap_object("VolumeSnapshot", ns, name, cls);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(json_get(body,
	    "metadata"), "annotations"), "cairn.io/backup-name", bname);
	json_set_str(body, "spec.source.persistentVolumeClaimName", claim);
	vs = create_or_get(path, name, body);
	if (strcmp(json_str_or(vs, "spec.source.persistentVolumeClaimName", ""),
	    claim) != 0)
		fail("VolumeSnapshot %s/%s exists for another claim", ns, name);
	cJSON_Delete(vs);
	progress(0, fallback);
	vs = wait_ready(ns, name, fallback, 1);
	vsc_path = xasprintf(SNAP_API "/volumesnapshotcontents/%s",
	    json_str_or(vs, "status.boundVolumeSnapshotContentName", ""));
	vsc = kube("GET", vsc_path, NULL, &st);
	if (st != 200 || json_str(vsc, "status.snapshotHandle") == NULL)
		fail("reading the content of VolumeSnapshot %s/%s: %d %s", ns,
		    name, st, why(vsc));
	props = cJSON_CreateObject();
	property(props, "snapshotHandle", json_str(vsc, "status.snapshotHandle"));
	property(props, "volumeSnapshotContent", json_str(vsc, "metadata.name"));
	property(props, "volumeSnapshotClass", cls);
	property(props, "driver", json_str(vsc, "spec.driver"));
	property(props, "deletionPolicy", json_str(vsc, "spec.deletionPolicy"));
	property(props, "restoreSize", json_str(vs, "status.restoreSize"));
	property(props, "storageClass", json_str(sc, "metadata.name"));
	property(props, "sourceClaim", claim);
	res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "type", "properties");
	cJSON_AddItemToObject(res, "properties", props);
	say(res);
	/* The snapshot now belongs to the backup: keep the content only. */
	body = cJSON_CreateObject();
	json_set_str(body, "spec.deletionPolicy", "Retain");
	cJSON_Delete(kube("PATCH", vsc_path, body, &st));
	cJSON_Delete(body);
	if (st != 200)
		fail("keeping VolumeSnapshotContent %s: %d", json_str_or(vsc,
		    "metadata.name", "?"), st);
	{
		char *one = xasprintf("%s/%s", path, name);

		cJSON_Delete(kube("DELETE", one, NULL, &st));
		free(one);
	}
	res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "type", "result");
	cJSON_AddStringToObject(res, "snapshotID", json_str_or(vsc,
	    "metadata.name", ""));
	say(res);
	cJSON_Delete(vs);
	cJSON_Delete(vsc);
	free(vsc_path);
	free(path);
	free(name);
	free(cls);
}

/* ---- restore -------------------------------------------------------------- */

static void
do_restore(const cJSON *req)
{
	const cJSON *pvc = json_get(req, "targetPersistentVolumeClaim");
	const cJSON *p = json_get(req, "backupProperties");
	const char *ns = json_str(pvc, "metadata.namespace");
	const char *claim = json_str(pvc, "metadata.name");
	const char *handle = json_str(p, "snapshotHandle");
	const char *driver = json_str(p, "driver");
	const char *rname = json_str_or(req, "restoreName", "restore");
	char *vs_name, *vsc_name, *path;
	cJSON *body, *r, *vs, *res;
	uint64_t fallback = 0;

	if (ns == NULL || claim == NULL)
		fail("restore_volume needs targetPersistentVolumeClaim "
		    "(cairn's protocol 2)");
	if (handle == NULL || driver == NULL)
		fail("the backup's properties name no snapshot handle and driver");
	vs_name = obj_name(claim, rname);
	{
		char *t = obj_name("cairn", ns);

		vsc_name = obj_name(t, vs_name);
		free(t);
	}
	/* a pre-provisioned content for the handle: Retain, the backup owns it */
	body = snap_object("VolumeSnapshotContent", NULL, vsc_name,
	    json_str(p, "volumeSnapshotClass"));
	json_set_str(body, "spec.deletionPolicy", "Retain");
	json_set_str(body, "spec.driver", driver);
	json_set_str(body, "spec.source.snapshotHandle", handle);
	json_set_str(body, "spec.volumeSnapshotRef.apiVersion",
	    "snapshot.storage.k8s.io/v1");
	json_set_str(body, "spec.volumeSnapshotRef.kind", "VolumeSnapshot");
	json_set_str(body, "spec.volumeSnapshotRef.namespace", ns);
	json_set_str(body, "spec.volumeSnapshotRef.name", vs_name);
	r = create_or_get(SNAP_API "/volumesnapshotcontents", vsc_name, body);
	if (strcmp(json_str_or(r, "spec.source.snapshotHandle", ""), handle) != 0)
		fail("VolumeSnapshotContent %s exists for another snapshot",
		    vsc_name);
	cJSON_Delete(r);
	/* the VolumeSnapshot the claim is provisioned from */
	path = xasprintf(SNAP_API "/namespaces/%s/volumesnapshots", ns);
	body = snap_object("VolumeSnapshot", ns, vs_name,
	    json_str(p, "volumeSnapshotClass"));
	json_set_str(body, "spec.source.volumeSnapshotContentName", vsc_name);
	cJSON_Delete(create_or_get(path, vs_name, body));
	(void)str_parse_quantity(json_str(p, "restoreSize"), &fallback);
	vs = wait_ready(ns, vs_name, fallback, 0);
	res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "type", "result");
	cJSON_AddStringToObject(res, "volumeID", handle);
	json_set_str(res, "dataSource.apiGroup", "snapshot.storage.k8s.io");
	json_set_str(res, "dataSource.kind", "VolumeSnapshot");
	json_set_str(res, "dataSource.name", vs_name);
	if (json_str(vs, "status.restoreSize") != NULL)
		cJSON_AddStringToObject(res, "restoreSize", json_str(vs,
		    "status.restoreSize"));
	else if (json_str(p, "restoreSize") != NULL)
		cJSON_AddStringToObject(res, "restoreSize", json_str(p,
		    "restoreSize"));
	say(res);
	cJSON_Delete(vs);
	free(path);
	free(vs_name);
	free(vsc_name);
}

/* ---- delete ---------------------------------------------------------------- */

static void
do_delete(const cJSON *req)
{
	const cJSON *p = json_get(req, "backupProperties");
	const char *name = json_str(req, "snapshotID");
	const char *policy = json_str_or(p, "deletionPolicy", "Delete");
	const char *handle = json_str(p, "snapshotHandle");
	char *path;
	cJSON *vsc, *body, *res;
	int st;

	if (name == NULL || name[0] == '\0')
		fail("delete_snapshot without a snapshotID");
	path = xasprintf(SNAP_API "/volumesnapshotcontents/%s", name);
	vsc = kube("GET", path, NULL, &st);
	cJSON_Delete(vsc);
	if (st == 404 && strcmp(policy, "Delete") == 0 && handle != NULL &&
	    json_str(p, "driver") != NULL) {
		/* gone from the cluster (another cluster's backup): recreate
		 * it so that the driver deletes the snapshot */
		body = snap_object("VolumeSnapshotContent", NULL, name, NULL);
		json_set_str(body, "spec.deletionPolicy", "Delete");
		json_set_str(body, "spec.driver", json_str(p, "driver"));
		json_set_str(body, "spec.source.snapshotHandle", handle);
		json_set_str(body, "spec.volumeSnapshotRef.namespace", "default");
		json_set_str(body, "spec.volumeSnapshotRef.name", name);
		cJSON_Delete(create_or_get(SNAP_API "/volumesnapshotcontents",
		    name, body));
		st = 200;
	} else if (st == 404) {
		st = 0;		/* nothing left to delete */
	} else if (st != 200) {
		fail("reading VolumeSnapshotContent %s: %d", name, st);
	} else {
		body = cJSON_CreateObject();
		json_set_str(body, "spec.deletionPolicy", policy);
		cJSON_Delete(kube("PATCH", path, body, &st));
		cJSON_Delete(body);
		if (st != 200)
			fail("setting the deletion policy of %s: %d", name, st);
	}
	if (st == 200) {
		res = kube("DELETE", path, NULL, &st);
		if (st / 100 != 2 && st != 404)
			fail("deleting VolumeSnapshotContent %s: %d %s", name, st,
			    why(res));
		cJSON_Delete(res);
	}
	res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "type", "result");
	say(res);
	free(path);
}

int
main(void)
{
	cJSON *o = cJSON_CreateObject(), *types, *req;
	const char *type;
	int64_t ms;

	setvbuf(stdout, NULL, _IOLBF, 0);
	cJSON_AddStringToObject(o, "type", "hello");
	cJSON_AddStringToObject(o, "name", "csi-snapshotter");
	cJSON_AddNumberToObject(o, "protocolVersion", 2);
	types = cJSON_AddArrayToObject(o, "volumeTypes");
	cJSON_AddItemToArray(types, cJSON_CreateString("csi"));
	cJSON_AddBoolToObject(o, "nodeLocal", 0);
	say(o);
	req = read_line();
	if (req == NULL)
		return 0;	/* a handshake only */
	if (json_int(req, "protocolVersion", 1) < 2)
		fail("cairn speaks protocol 1 to this plugin; it needs 2");
	if ((ms = duration_ms(json_str(req, "config.readyTimeout"))) > 0)
		ready_timeout_ms = ms;
	if ((ms = duration_ms(json_str(req, "csiSnapshotTimeout"))) > 0)
		ready_timeout_ms = ms;
	if ((ms = duration_ms(json_str(req, "config.pollInterval"))) > 0)
		poll_ms = ms;
	type = json_str_or(req, "type", "");
	if (strcmp(type, "create_snapshot") == 0)
		do_backup(req);
	else if (strcmp(type, "restore_volume") == 0)
		do_restore(req);
	else if (strcmp(type, "delete_snapshot") == 0)
		do_delete(req);
	else
		fail("unknown request type \"%s\"", type);
	cJSON_Delete(req);
	return 0;
}

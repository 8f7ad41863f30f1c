"""Every field cairn writes into its own objects exists in the CRD schema.

A real API server prunes fields that a structural CRD schema does not
declare (silently: the write succeeds, the field is gone on the next
read); kubesim does not prune, so a field missing from schema/gen_crds.py
would pass every other test and lose data in a cluster. This case watches
all six cairn.io kinds while `cairn server` runs the flows that write them
(a backup of objects and volumes, hostpath and an external plugin, in
several parts with checkpoints; a schedule; location validation; a restore
of the volumes; GC of a deleted backup) and checks every spec and status
path of every version seen against schema/crds/*.yaml: the path must be
declared (or be under a declared map / preserve-unknown-fields object) and
the value must have the declared type.
"""
import glob
import json
import os
import shutil
import ssl
import threading
import time
import urllib.request

import yaml

from cairntest import BIN, SRCDIR, case, main, wait_for, CheckFailed

NS = "cairn-system"
APP = "shop"
BASE = "/apis/cairn.io/v1/namespaces/%s/" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
TYPES = {"string": str, "object": dict, "array": list, "boolean": bool}


def load_schemas():
    out = {}
    for path in glob.glob(os.path.join(SRCDIR, "schema", "crds", "*.yaml")):
        with open(path) as f:
            crd = yaml.safe_load(f)
        out[crd["spec"]["names"]["plural"]] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return out


def check_value(schema, value, path, problems):
    """Walk value against schema; append 'path: problem' strings."""
    if value is None:
        if not schema.get("nullable"):
            problems.append("%s: null but not nullable" % path)
        return
    typ = schema.get("type")
    if typ == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append("%s: %r is not an integer" % (path, value))
        return
    if typ in TYPES and not isinstance(value, TYPES[typ]):
        problems.append("%s: %r is not a %s" % (path, value, typ))
        return
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if typ == "array":
        for n, v in enumerate(value):
            check_value(schema.get("items", {}), v, "%s[%d]" % (path, n), problems)
    elif typ == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if props is not None and k in props:
                check_value(props[k], v, "%s.%s" % (path, k), problems)
            elif isinstance(extra, dict):
                check_value(extra, v, "%s.%s" % (path, k), problems)
            elif props is None and extra is None:
                pass    # a free-form object ({"type": "object"}: metadata)
            else:
                problems.append("%s.%s: not in the schema (a real API server prunes it)"
                                % (path, k))


class Watcher:
    """Every version of every object of one kind, from a watch stream."""

    def __init__(self, sim, plural):
        self.plural = plural
        self.objects = []
        self.error = None
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(sim.url + BASE + plural + "?watch=true&timeoutSeconds=600",
                                     headers={"Authorization": "Bearer " + sim.token})
        self.resp = urllib.request.urlopen(req, context=ctx, timeout=300)
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        try:
            for line in self.resp:
                if line.strip():
                    ev = json.loads(line)
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self.objects.append(ev["object"])
        except Exception as e:   # kubesim stops at the end of the case
            self.error = e

    def seen(self):
        return list(self.objects)


def add_volume(sim, pv, path, plugin):
    sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv, "annotations": {"cairn.io/volume-plugin": plugin}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": path},
                 "claimRef": {"namespace": APP, "name": "claim-" + pv}}})
    sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim-" + pv},
        "spec": {"volumeName": pv, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})


def wait_phase(sim, srv, plural, name, timeout=90):
    def done():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        o = sim.get(BASE + plural + "/" + name)[1]
        return o if o.get("status", {}).get("phase") in FINAL else None
    return wait_for(done, timeout, "%s %s final" % (plural, name))


@case
def every_written_field_is_in_the_crd_schema(t):
    schemas = load_schemas()
    t.eq(sorted(schemas), ["backups", "backupstoragelocations", "restores", "schedules",
                           "volumepluginbackups", "volumepluginrestores"], "CRDs found")
    sim = t.kubesim()
    sim.install_crds(NS)
    watchers = {p: Watcher(sim, p) for p in schemas}
    store = t.mkdir("store")
    sim.ok("POST", BASE + "backupstoragelocations", {
        "apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
        "metadata": {"name": "default"},
        "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"}, "config": {"path": store},
                 "default": True, "validationFrequency": "1s", "backupSyncPeriod": "1s"}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": APP}})
    for i in range(40):
        sim.ok("POST", "/api/v1/namespaces/%s/configmaps" % APP, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%02d" % i},
            "data": {"blob": os.urandom(3000).hex()}})
    pdir = t.mkdir("plugins")
    shutil.copy(os.path.join(SRCDIR, "plugins", "example-snapshotter"), pdir)
    with open(os.path.join(pdir, "example-snapshotter.json"), "w") as f:
        json.dump({"snapshotDir": t.mkdir("snaps")}, f)
    vols = t.mkdir("volumes")
    for pv, plugin in (("pv-host", "hostpath"), ("pv-ex", "example-snapshotter")):
        d = os.path.join(vols, pv)
        os.makedirs(d)
        for n in range(3):
            with open(os.path.join(d, "f%d" % n), "wb") as f:
                f.write(os.urandom(1 << 20))
        add_volume(sim, pv, d, plugin)
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "s1", "--journal", t.path("journal.db"),
                   "--retry-period", "200ms", "--gc-period", "1s", "--part-size", "4096",
                   "--plugin-dir", pdir], name="server")

    sim.ok("POST", BASE + "backups", {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                      "metadata": {"name": "b1"},
                                      "spec": {"includedNamespaces": [APP], "ttl": "1h"}})
    b = wait_phase(sim, srv, "backups", "b1")
    t.eq(b["status"]["phase"], "Completed", "backup (%s)" % b["status"])
    sim.ok("POST", BASE + "schedules", {"apiVersion": "cairn.io/v1", "kind": "Schedule",
                                        "metadata": {"name": "hourly"},
                                        "spec": {"schedule": "@every 1h",
                                                 "template": {"includedNamespaces": [APP],
                                                              "snapshotVolumes": False}}})
    wait_for(lambda: sim.get(BASE + "schedules/hourly")[1].get("status", {}).get("lastBackup"),
             30, "schedule made a backup")
    # Restore the volumes into new directories (the PVs are gone).
    for pv in ("pv-host", "pv-ex"):
        sim.ok("DELETE", "/api/v1/namespaces/%s/persistentvolumeclaims/claim-%s" % (APP, pv))
        sim.ok("DELETE", "/api/v1/persistentvolumes/%s" % pv)
    sim.ok("POST", BASE + "restores", {"apiVersion": "cairn.io/v1", "kind": "Restore",
                                       "metadata": {"name": "r1"},
                                       "spec": {"backupName": "b1",
                                                "namespaceMapping": {APP: "shop2"}}})
    r = wait_phase(sim, srv, "restores", "r1", timeout=120)
    t.check(r["status"]["phase"] in ("Completed", "PartiallyFailed"), "restore (%s)" % r["status"])
    # GC of a deleted backup (the finalizer, then the object goes).
    sim.ok("DELETE", BASE + "backups/b1")
    wait_for(lambda: sim.get(BASE + "backups/b1")[0] == 404, 30, "deleted backup released")
    wait_for(lambda: sim.get(BASE + "backupstoragelocations/default")[1]
             .get("status", {}).get("lastSyncedTime"), 30, "location validated and synced")
    srv.stop()
    time.sleep(0.5)     # the last events on their way

    problems, seen = [], {}
    for plural, w in sorted(watchers.items()):
        objs = w.seen()
        t.check(objs, "watch of %s saw objects (%s)" % (plural, w.error))
        for o in objs:
            for part in ("spec", "status"):
                if part in o:
                    check_value(schemas[plural]["properties"][part], o[part],
                                "%s.%s" % (plural, part), problems)
            for k in o.get("status", {}):
                seen.setdefault(plural, set()).add(k)
    uniq = sorted(set(problems))
    t.eq(uniq, [], "fields written but not in the CRD schema (%d)" % len(uniq))
    # The flows above did write what they are meant to cover. (A volume's
    # status.checkpoint is written at most once a second while it copies;
    # these volumes copy faster, so its fields are checked by name below.)
    t.check({"claim", "checkpoint", "progress"} <= seen.get("backups", set()),
            "backup status fields seen: %s" % sorted(seen.get("backups", ())))
    t.check({"claim", "progress"} <= seen.get("volumepluginbackups", set()),
            "VPB status fields seen: %s" % sorted(seen.get("volumepluginbackups", ())))
    t.check({"claim", "progress"} <= seen.get("volumepluginrestores", set()),
            "VPR status fields seen: %s" % sorted(seen.get("volumepluginrestores", ())))
    ck = {"uploadID": "u", "parts": 2, "lastFile": "a/b", "bytesDone": 5, "filesDone": 1}
    problems = []
    check_value(schemas["volumepluginbackups"]["properties"]["status"], {"checkpoint": ck},
                "volumepluginbackups.status", problems)
    t.eq(problems, [], "a volume checkpoint as engine/volumes_backup.c hp_ckpt_cb() writes it")


main()

"""CSI volumes through VolumeSnapshots (issue 25): cairn's CSI snapshot
plugin (plugins/csi-snapshotter, protocol 2) against kubesim's snapshot
controller (tests/kubesim/ks_snapshot.py: the external-snapshotter's
objects, a CSI driver whose volumes are directories).

One case, as a user lives it:
  - a claim of a CSI StorageClass whose driver has a VolumeSnapshotClass
    is backed up: its VolumePluginBackup (no node: the plugin is not
    node-local) shows progress from the VolumeSnapshot's status (0 of the
    restore size, then all of it once readyToUse), records the snapshot
    handle and what a restore needs in backupProperties; the
    VolumeSnapshot is gone from the application's namespace, its
    VolumeSnapshotContent is kept (Retain) for the backup;
  - restored into another namespace: the PV is not created, the claim is
    created with the snapshot as dataSource, the driver provisions a new
    volume from it: byte-identical to the original;
  - `cairn backup delete` deletes the snapshot per its class's deletion
    policy (Delete): the content and the driver's snapshot are gone, the
    restored volume stays.
Also: a claim whose driver has no VolumeSnapshotClass fails its own volume
with a clear message (the backup is PartiallyFailed); a restore whose
snapshot the driver lost fails its volume with the VolumeSnapshot's
status.error (the restore is PartiallyFailed).
"""
import os
import shutil
import subprocess
import sys
import time

from cairntest import BIN, BUILDDIR, SRCDIR, case, main, wait_for, CheckFailed

NS = "cairn-system"
APP, COPY = "shop", "shop-copy"
DRIVER = "hostpath.csi.k8s.io"
SNAP = "/apis/snapshot.storage.k8s.io/v1"
VPB = "/apis/cairn.io/v1/namespaces/%s/volumepluginbackups" % NS
VPR = "/apis/cairn.io/v1/namespaces/%s/volumepluginrestores" % NS
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
TREE = os.path.join(SRCDIR, "tests", "helpers", "volume_tree.py")
PLUGIN = os.path.join(BUILDDIR, "plugins", "csi-snapshotter")
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def setup(t):
    csi = t.mkdir("csi")
    sim = t.kubesim(extra=["--snapshot-crds", "--csi-root", csi, "--snapshot-seconds", "2"])
    sim.install_crds(NS)
    store = t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": store}, "default": True}})
    for ns in (APP,):
        sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    sim.ok("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "csi-fast"},
        "provisioner": DRIVER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
    sim.ok("POST", "/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "nfs-like"},
        "provisioner": "other.csi.example.com", "reclaimPolicy": "Delete"})
    sim.ok("POST", SNAP + "/volumesnapshotclasses", {
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
        "metadata": {"name": "csi-snap",
                     "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"}},
        "driver": DRIVER, "deletionPolicy": "Delete"})
    plugins = t.mkdir("plugins")
    shutil.copy(PLUGIN, os.path.join(plugins, "csi-snapshotter"))
    return sim, store, csi, plugins


def csi_volume(t, sim, csi, pv, claim, sc, driver, handle, mb):
    data = os.path.join(csi, "volumes", handle)
    r = subprocess.run([sys.executable, TREE, "make", data, "--mb", str(mb), "--seed", "7"],
                       capture_output=True, text=True)
    t.check(r.returncode == 0, r.stderr)
    sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                 "persistentVolumeReclaimPolicy": "Delete", "csi": {"driver": driver, "volumeHandle": handle},
                 "claimRef": {"namespace": APP, "name": claim}}})
    sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
        "spec": {"storageClassName": sc, "volumeName": pv, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for(lambda: sim.ok("GET", "/api/v1/namespaces/%s/persistentvolumeclaims/%s" % (APP, claim))
             .get("status", {}).get("phase") == "Bound", 20, "claim %s bound" % claim)
    return data


def phase(sim, path):
    code, obj, _ = sim.get(path)
    return (obj or {}).get("status", {}).get("phase") if code == 200 else None


def same_tree(t, a, b):
    r = subprocess.run([sys.executable, TREE, "compare", a, b], capture_output=True, text=True)
    t.check(r.returncode == 0, "trees differ %s vs %s:\n%s" % (a, b, r.stdout[:2000]))


@case
def csi_claim_backed_up_restored_and_deleted_through_snapshots(t):
    sim, store, csi, plugins = setup(t)
    data = csi_volume(t, sim, csi, "pv-db", "db", "csi-fast", DRIVER, "vol-db", 3)
    csi_volume(t, sim, csi, "pv-other", "other", "nfs-like", "other.csi.example.com", "vol-other", 1)
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS, "--server-id", "s1",
                   "--journal", t.path("journal.db"), "--plugin-dir", plugins, "--retry-period", "200ms"],
                  name="server")
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "b1", "namespace": NS},
                        "spec": {"includedNamespaces": [APP], "csiSnapshotTimeout": "2m"}})
    samples = []

    def sample():
        if not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        code, v, _ = sim.get("%s/b1-pv-db" % VPB)
        if code == 200 and v.get("status", {}).get("progress"):
            p = v["status"]["progress"]
            samples.append((p.get("bytesDone"), p.get("totalBytes")))
        return phase(sim, "%s/b1" % BK) in FINAL
    wait_for(sample, 120, "backup b1 to end", interval=0.1)
    t.eq(phase(sim, "%s/b1" % BK), "PartiallyFailed", "backup phase (the claim without a snapshot class fails)")
    v = sim.ok("GET", "%s/b1-pv-db" % VPB)
    st, props = v["status"], v["status"].get("backupProperties", {})
    t.eq(st.get("phase"), "Completed", "the CSI volume's copy (%s)" % st.get("message"))
    t.eq(v["spec"]["provider"], "csi-snapshotter", "provider")
    t.check("cairn.io/node" not in v["metadata"].get("labels", {}), "no node: the plugin is not node-local")
    gib = 1 << 30
    t.eq((st["progress"]["bytesDone"], st["progress"]["totalBytes"]), (gib, gib),
         "progress ends at the snapshot's restoreSize")
    t.check((0, gib) in samples, "progress showed the snapshot not ready yet: %s" % samples[:10])
    for k in ("snapshotHandle", "volumeSnapshotContent", "driver", "volumeSnapshotClass", "restoreSize"):
        t.check(props.get(k), "backupProperties.%s: %s" % (k, props))
    t.eq((props["driver"], props["volumeSnapshotClass"], props["deletionPolicy"], props["restoreSize"]),
         (DRIVER, "csi-snap", "Delete", "1Gi"), "backupProperties")
    t.eq(st.get("snapshotID"), props["volumeSnapshotContent"], "snapshotID is the content")
    vsc = sim.ok("GET", "%s/volumesnapshotcontents/%s" % (SNAP, props["volumeSnapshotContent"]))
    t.eq(vsc["spec"]["deletionPolicy"], "Retain", "the content is kept for the backup")
    t.eq(vsc["status"]["snapshotHandle"], props["snapshotHandle"], "handle")
    wait_for(lambda: sim.ok("GET", "%s/namespaces/%s/volumesnapshots" % (SNAP, APP))["items"] == [], 20,
             "the VolumeSnapshot to leave the application's namespace")
    snapdir = os.path.join(csi, "snapshots", props["snapshotHandle"])
    same_tree(t, data, snapdir)
    other = sim.ok("GET", "%s/b1-pv-other" % VPB)["status"]
    t.eq(other.get("phase"), "Failed", "the claim whose driver has no snapshot class")
    t.check("no VolumeSnapshotClass has driver other.csi.example.com (storage class nfs-like)"
            in other.get("message", ""), other.get("message"))

    # restore into another namespace, through a claim with a dataSource
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "r1", "namespace": NS},
                        "spec": {"backupName": "b1", "includedResources": ["persistentvolumeclaims",
                                                                            "persistentvolumes"],
                                 "labelSelector": {}, "namespaceMapping": {APP: COPY},
                                 "includedNamespaces": [APP]}})
    wait_for(lambda: phase(sim, "%s/r1" % RS) in FINAL, 120, "restore r1 to end", interval=0.2)
    r = sim.ok("GET", "%s/r1" % RS)["status"]
    vpr = sim.ok("GET", "%s/r1-pv-db" % VPR)["status"]
    t.eq(vpr.get("phase"), "Completed", "VolumePluginRestore (%s)" % vpr.get("message"))
    t.eq(vpr.get("dataSource"), {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                 "name": vpr["dataSource"]["name"]}, "the restore names a VolumeSnapshot")
    pvc = wait_for(lambda: (lambda c: c if c.get("status", {}).get("phase") == "Bound" else None)(
        sim.ok("GET", "/api/v1/namespaces/%s/persistentvolumeclaims/db" % COPY)), 60,
        "the restored claim to be provisioned and bound (restore %s)" % r)
    t.eq(pvc["spec"]["dataSource"]["name"], vpr["dataSource"]["name"], "the claim's dataSource")
    newpv = sim.ok("GET", "/api/v1/persistentvolumes/%s" % pvc["spec"]["volumeName"])
    t.check(newpv["spec"]["csi"]["volumeHandle"] != "vol-db", "a new volume")
    same_tree(t, data, os.path.join(csi, "volumes", newpv["spec"]["csi"]["volumeHandle"]))
    t.eq(sim.get("/api/v1/persistentvolumes/pv-db")[1]["spec"]["csi"]["volumeHandle"], "vol-db",
         "the original volume is untouched")

    # a snapshot the driver lost: the VolumeSnapshot's status.error is the volume's failure
    hidden = snapdir + ".hidden"
    os.rename(snapdir, hidden)
    os.rename(snapdir + ".json", hidden + ".json")
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": "r2", "namespace": NS},
                        "spec": {"backupName": "b1", "includedResources": ["persistentvolumeclaims",
                                                                            "persistentvolumes"],
                                 "labelSelector": {}, "namespaceMapping": {APP: COPY + "-2"},
                                 "includedNamespaces": [APP]}})
    wait_for(lambda: phase(sim, "%s/r2" % RS) in FINAL, 120, "restore r2 to end", interval=0.2)
    t.eq(phase(sim, "%s/r2" % RS), "PartiallyFailed", "a restore whose snapshot is gone")
    vpr2 = sim.ok("GET", "%s/r2-pv-db" % VPR)["status"]
    t.eq(vpr2.get("phase"), "Failed", "VolumePluginRestore of the lost snapshot")
    t.check("snapshot %s of driver %s does not exist" % (props["snapshotHandle"], DRIVER)
            in vpr2.get("message", ""), "the driver's error is the message: %s" % vpr2.get("message"))
    os.rename(hidden, snapdir)
    os.rename(hidden + ".json", snapdir + ".json")

    # deleting the backup deletes the snapshot per its policy (Delete)
    srv.stop()
    d = subprocess.run([BIN, "backup", "delete", "b1", "--confirm", "--plugin-dir", plugins,
                        "--kubeconfig", sim.kubeconfig, "--namespace", NS], capture_output=True, text=True,
                       timeout=120)
    t.eq(d.returncode, 0, "backup delete: %s%s" % (d.stdout, d.stderr))
    wait_for(lambda: sim.get("%s/volumesnapshotcontents/%s" % (SNAP, props["volumeSnapshotContent"]))[0] == 404,
             20, "the backup's VolumeSnapshotContent to go")
    wait_for(lambda: not os.path.exists(snapdir), 20, "the driver's snapshot to be deleted")
    t.check(sim.get("%s/b1" % BK)[0] == 404, "the Backup is gone")
    same_tree(t, data, os.path.join(csi, "volumes", newpv["spec"]["csi"]["volumeHandle"]))


main()

"""A refused status never runs the work again (issue 19).

A plugin reports properties worth 3.6 MiB: the VolumePluginBackup's final
status is more than the API server takes (413). Before, the operation stayed
InProgress and its plugin ran again on every poll (a real snapshot each
time); now the status is written without the properties, the backup goes
on, and the plugin ran exactly once.
"""
import os

from cairntest import BIN, case, main, wait_for

NS = "cairn-system"
APP = "app"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
VPB = "/apis/cairn.io/v1/namespaces/%s/volumepluginbackups" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


@case
def oversized_plugin_status_does_not_rerun_the_plugin(t):
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": t.mkdir("store")}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": APP}})
    vol = t.mkdir("vol")
    sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv-big", "annotations": {"cairn.io/volume-plugin": "bigprops"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "nfs": {"path": vol, "server": "nfs.example"},
                 "claimRef": {"namespace": APP, "name": "data"}}})
    sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"volumeName": "pv-big", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    pdir = t.mkdir("plugins")
    runs = t.path("runs")
    # 60 lines of 60 properties of 1000 bytes: 3.6 MB of status
    body = ("read req || exit 0\necho run >> '%s'\n"
            "v=$(head -c 1000 /dev/zero | tr '\\0' x)\n"
            "for l in $(seq 1 60); do\n"
            "  line='{\"type\":\"properties\",\"properties\":{'\n"
            "  for k in $(seq 1 60); do\n"
            "    [ $k -gt 1 ] && line=\"$line,\"\n"
            "    line=\"$line\\\"p${l}_$k\\\":\\\"$v\\\"\"\n"
            "  done\n"
            "  echo \"$line}}\"\n"
            "done\n"
            "echo '{\"type\":\"result\",\"snapshotID\":\"snap-1\"}'\n" % runs)
    p = os.path.join(pdir, "bigprops")
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho '{\"type\":\"hello\",\"name\":\"bigprops\",\"protocolVersion\":1,"
                "\"volumeTypes\":[\"nfs\"]}'\n" + body)
    os.chmod(p, 0o755)
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "s1", "--journal", t.path("j.db"), "--retry-period", "200ms",
                   "--plugin-dir", pdir, "--log-level", "info"], name="server")
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": "big", "namespace": NS},
                        "spec": {"includedNamespaces": [APP]}})

    def final():
        b = sim.ok("GET", "%s/big" % BK)
        return b if b.get("status", {}).get("phase") in FINAL else None
    try:
        b = wait_for(final, 60, "the backup to finish", interval=0.3)
    finally:
        with open(runs) if os.path.exists(runs) else open(os.devnull) as f:
            n = len(f.read().split())
    t.eq(n, 1, "plugin runs")
    v = sim.ok("GET", VPB)["items"]
    t.eq(len(v), 1, "VolumePluginBackups")
    st = v[0]["status"]
    t.eq((st["phase"], st.get("snapshotID")), ("Completed", "snap-1"), "VolumePluginBackup status")
    t.check("refused by the API server" in st.get("message", ""), "message: %s" % st.get("message"))
    t.check(b["status"]["phase"] in ("Completed", "PartiallyFailed"), "backup: %s" % b["status"])
    t.check(srv.alive(), "server alive")


main()

"""Volume data (issue 11): hostPath volumes backed up and restored by cairn.

A namespace whose PVCs are bound to hostPath PVs over temp directories is
backed up by `cairn server` against kubesim: one VolumePluginBackup per
volume, whose bytesDone (sampled while it runs) rises monotonically to
totalBytes; the backup ends Completed and -volumepluginbackups.json.gz
decodes to the same objects. The namespace is then lost and restored by
the restore controller: each PV points at a fresh directory holding a
byte-identical tree (modes, times, symlinks, sparse files, odd names).
Also: plugins that exit early, print garbage or hang fail only their own
volume; kill -9 during a copy and a restart resume it; node-agents claim
only their node's work; a dead node-agent's copy is taken over by another
agent of its node once its Lease expired, and an agent whose Lease lapsed
(SIGSTOP) never writes again after the takeover (fencing).

CAIRN_VOLUME_TEST_MB (default 200) is the total data size of the main case.
"""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import urllib.request

from cairntest import BIN, BUILDDIR, SRCDIR, case, main, wait_for, free_port, CheckFailed
from partwatch import PartWatch

NS = "cairn-system"
APP = "shop"
VPB = "/apis/cairn.io/v1/namespaces/%s/volumepluginbackups" % NS
VPR = "/apis/cairn.io/v1/namespaces/%s/volumepluginrestores" % NS
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
TREE = os.path.join(SRCDIR, "tests", "helpers", "volume_tree.py")
RUNNER = os.path.join(BUILDDIR, "tests", "helpers", "restore_runner")
TOTAL_MB = float(os.environ.get("CAIRN_VOLUME_TEST_MB", "200"))
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def tree(*args):
    r = subprocess.run([sys.executable, TREE] + [str(a) for a in args],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def random_dir(path, mb, seed):
    """Incompressible files of 1..8 MiB, mb in total."""
    os.makedirs(path, exist_ok=True)
    left, i = int(mb * (1 << 20)), 0
    while left > 0:
        n = min(left, (1 + (i * 7 + seed) % 8) << 20)
        with open(os.path.join(path, "blob-%03d" % i), "wb") as f:
            f.write(os.urandom(n))
        left -= n
        i += 1


def setup(t, tokens=None):
    sim = t.kubesim(tokens=tokens)
    sim.install_crds(NS)
    store = t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": store}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": APP}})
    return sim, store


def add_volume(sim, pv, path, kind="hostPath", annotations=None, node=None, pod_node=None):
    spec = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": APP, "name": "claim-" + pv}}
    spec[kind] = {"path": path}
    if node:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    md = {"name": pv}
    if annotations:
        md["annotations"] = annotations
    sim.ok("POST", "/api/v1/persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume",
                                                  "metadata": md, "spec": spec})
    sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim-" + pv},
        "spec": {"volumeName": pv, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10Gi"}}}})
    if pod_node:
        sim.ok("POST", "/api/v1/namespaces/%s/pods" % APP, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user-" + pv},
            "spec": {"nodeName": pod_node, "containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "claim-" + pv}}]}})


def server(t, sim, sid="s1", journal=None, extra=()):
    journal = journal or t.path("journal-%s.db" % sid)
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                    "--server-id", sid, "--journal", journal, "--retry-period", "200ms",
                    "--part-size", str(1 << 20)] + list(extra), name="server-" + sid)


def create_backup(sim, name, spec=None):
    spec = spec if spec is not None else {"includedNamespaces": [APP]}
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name, "namespace": NS}, "spec": spec})


def backup_phase(sim, name):
    return sim.ok("GET", "%s/%s" % (BK, name)).get("status", {}).get("phase")


def vpbs(sim, backup):
    items = sim.ok("GET", VPB + "?labelSelector=cairn.io/backup-name%3D" + backup)["items"]
    return {v["spec"]["volume"]: v for v in items}


def sample_until_final(sim, name, srv, timeout=240, samples=None, stop_when=None):
    """Poll the VPBs and the Backup; samples[volume] gets (done, total) in order."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if srv is not None and not srv.alive():
            raise CheckFailed("server exited: %s" % srv.output()[-3000:])
        for vol, v in vpbs(sim, name).items():
            p = v.get("status", {}).get("progress")
            if p and samples is not None:
                samples.setdefault(vol, []).append((p.get("bytesDone", 0), p.get("totalBytes", 0)))
        if stop_when is not None and stop_when():
            return None
        ph = backup_phase(sim, name)
        if ph in FINAL:
            return ph
        time.sleep(0.05)
    raise CheckFailed("backup %s did not finish in %ss" % (name, timeout))


def read_gz_json(store, key_suffix):
    for d, _, files in os.walk(store):
        for f in files:
            if f.endswith(key_suffix) and ".cairn-uploads" not in d:
                with gzip.open(os.path.join(d, f)) as g:
                    return json.load(g)
    raise CheckFailed("%s not in the store" % key_suffix)


MOVER = os.path.join(BUILDDIR, "tests", "helpers", "volume_mover")


def stored_volume(store, backup, pv):
    """The index of pv's copy in backup (a deduplicated copy, issue 25)."""
    p = os.path.join(store, "backups", backup, "volumes", pv + ".index.tar.gz")
    if not os.path.exists(p):
        raise CheckFailed("no stored copy of %s" % pv)
    return p


def extract_stored(t, store, backup, pv, dst):
    """GNU tar lists the stored index; the mover alone restores the copy."""
    idx = stored_volume(store, backup, pv)
    r = subprocess.run(["tar", "-tzf", idx], capture_output=True, text=True)
    t.check(r.returncode == 0, "GNU tar lists the index: %s" % r.stderr)
    r = subprocess.run([MOVER, "restore", store, os.path.relpath(idx, store), dst,
                        "--chunks", "plugins/cairn-hostpath/%s/" % pv], capture_output=True, text=True)
    t.check(r.returncode == 0, "the stored copy restores: %s" % r.stderr)


def same_tree(t, a, b):
    rc, out = tree("compare", a, b)
    t.check(rc == 0, "trees differ %s vs %s:\n%s" % (a, b, out[:2000]))


def comparable(o):
    return {"name": o["metadata"]["name"], "labels": o["metadata"].get("labels"),
            "spec": o["spec"], "status": o.get("status")}


@case
def backup_and_restore_hostpath_volumes(t):
    sim, store = setup(t)
    vols = t.mkdir("volumes")
    big = os.path.join(vols, "pv-big")
    random_dir(big, max(TOTAL_MB - 40, 20), 1)
    odd = os.path.join(vols, "pv-tree")
    rc, out = tree("make", odd, "--mb", max(TOTAL_MB / 8, 2), "--seed", 3)
    t.check(rc == 0, out)
    small = os.path.join(vols, "pv-small")
    random_dir(small, 2, 5)
    add_volume(sim, "pv-big", big)
    add_volume(sim, "pv-tree", odd)
    add_volume(sim, "pv-small", small, kind="local")
    srv = server(t, sim)
    create_backup(sim, "b1")
    samples = {}
    phase = sample_until_final(sim, "b1", srv, samples=samples)
    t.eq(phase, "Completed", "backup phase")
    got = vpbs(sim, "b1")
    t.eq(sorted(got), ["pv-big", "pv-small", "pv-tree"], "one VolumePluginBackup per volume")
    for vol, path in (("pv-big", big), ("pv-tree", odd), ("pv-small", small)):
        v = got[vol]
        st = v["status"]
        t.eq(st.get("phase"), "Completed", "%s phase (%s)" % (vol, st.get("message")))
        t.eq(v["metadata"]["labels"].get("cairn.io/backup-name"), "b1", "backup label")
        t.eq(v["metadata"]["labels"].get("cairn.io/volume-name"), vol, "volume label")
        t.eq(v["spec"]["provider"], "cairn.io/hostpath", "provider")
        rc, logical = tree("bytes", path)
        t.eq(st["progress"]["totalBytes"], int(logical), "%s totalBytes" % vol)
        t.eq(st["progress"]["bytesDone"], st["progress"]["totalBytes"], "%s bytesDone" % vol)
        seq = [d for d, _ in samples.get(vol, [])]
        t.check(seq == sorted(seq), "%s bytesDone went down: %s" % (vol, seq[:50]))
        t.check(st.get("startTimestamp") and st.get("completionTimestamp"), "timestamps")
    # Status is written at most once a second: a copy that ran 3 s or more
    # must have been seen part-way (the default size makes it run longer).
    mid = [d for d, tot in samples.get("pv-big", []) if 0 < d < tot]
    st = got["pv-big"]["status"]
    secs = (time.mktime(time.strptime(st["completionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) -
            time.mktime(time.strptime(st["startTimestamp"], "%Y-%m-%dT%H:%M:%SZ")))
    t.check(len(mid) >= 1 or secs < 3, "pv-big progress was seen while running (%ds; samples %s)"
            % (secs, samples.get("pv-big", [])[:20]))
    # Persisted with the backup: the same objects.
    stored = read_gz_json(store, "b1-volumepluginbackups.json.gz")
    t.eq(sorted(comparable(o)["name"] for o in stored), sorted(v["metadata"]["name"] for v in got.values()),
         "stored VPB names")
    live = {v["metadata"]["name"]: comparable(v) for v in got.values()}
    for o in stored:
        t.eq(comparable(o), live[o["metadata"]["name"]], "stored VPB equals the live one")
    snaps = read_gz_json(store, "b1-volumesnapshots.json.gz")
    t.eq(sorted(s["spec"]["persistentVolumeName"] for s in snaps), ["pv-big", "pv-small", "pv-tree"],
         "velero volume snapshots")
    t.check(all(s["status"]["phase"] == "Completed" and s["status"]["providerSnapshotID"] for s in snaps),
            "snapshot ids")
    # `cairn backup describe` lists each volume with a bar, bytes and rate.
    d = subprocess.run([BIN, "backup", "describe", "b1", "--kubeconfig", sim.kubeconfig,
                        "--namespace", NS], capture_output=True, text=True)
    t.eq(d.returncode, 0, "describe exit code (%s)" % d.stderr)
    vol_lines = [l for l in d.stdout.splitlines() if l.strip().startswith("pv-")]
    t.eq(len(vol_lines), 3, "describe lists 3 volumes:\n%s" % d.stdout[-2000:])
    t.check(all("Completed" in l and "100%" in l and "cairn.io/hostpath" in l and " MiB / " in l
                for l in vol_lines), "describe volume lines: %s" % vol_lines)
    # What was stored restores by itself (GNU tar lists the index).
    x = os.path.join(t.mkdir("gnu-x"), "v")
    extract_stored(t, store, "b1", "pv-tree", x)
    same_tree(t, odd, x)
    srv.stop()

    # Disaster: the claims and volumes are gone; restore into fresh directories.
    for pv in ("pv-big", "pv-tree", "pv-small"):
        sim.ok("DELETE", "/api/v1/namespaces/%s/persistentvolumeclaims/claim-%s" % (APP, pv))
        sim.ok("DELETE", "/api/v1/persistentvolumes/%s" % pv)
    runner = t.spawn([RUNNER, "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                      "--journal", t.path("restore.db"), "--server-id", "r1",
                      "--period-ms", "100"], name="runner")
    r = restore_and_wait(sim, runner, "r1", "b1")
    t.eq(r["status"]["phase"], "Completed", "restore phase (%s)" % r["status"])
    for vol, path, kind in (("pv-big", big, "hostPath"), ("pv-tree", odd, "hostPath"),
                            ("pv-small", small, "local")):
        pv = sim.ok("GET", "/api/v1/persistentvolumes/%s" % vol)
        newp = pv["spec"][kind]["path"]
        t.eq(newp, path + "-r1", "%s points at the restored data" % vol)
        same_tree(t, path, newp)
        vpr = sim.ok("GET", "%s/r1-%s" % (VPR, vol))
        t.eq(vpr["status"]["phase"], "Completed", "VolumePluginRestore phase")
        t.eq(vpr["status"]["progress"]["bytesDone"], vpr["status"]["progress"]["totalBytes"],
             "VolumePluginRestore progress")
        t.eq(vpr["metadata"]["labels"]["cairn.io/restore-name"], "r1", "restore label")
    d = subprocess.run([BIN, "restore", "describe", "r1", "--kubeconfig", sim.kubeconfig,
                        "--namespace", NS], capture_output=True, text=True)
    vol_lines = [l for l in d.stdout.splitlines() if l.strip().startswith("pv-")]
    t.eq(len(vol_lines), 3, "restore describe lists 3 volumes:\n%s%s" % (d.stdout[-2000:], d.stderr))
    t.check(all("Completed" in l and "100%" in l for l in vol_lines), "restore volume lines: %s" % vol_lines)
    pvc = sim.ok("GET", "/api/v1/namespaces/%s/persistentvolumeclaims/claim-pv-big" % APP)
    t.eq(pvc["spec"]["volumeName"], "pv-big", "claim restored after its volume")
    runner.stop()


def plugin(dirpath, name, body):
    p = os.path.join(dirpath, name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho '{\"type\":\"hello\",\"name\":\"%s\",\"protocolVersion\":1,"
                "\"volumeTypes\":[\"nfs\"]}'\n%s" % (name, body))
    os.chmod(p, 0o755)


@case
def misbehaving_plugins_fail_only_their_volume(t):
    sim, store = setup(t)
    pdir = t.mkdir("plugins")
    shutil.copy(os.path.join(SRCDIR, "plugins", "example-snapshotter"), pdir)
    snaps = t.mkdir("example-snaps")
    with open(os.path.join(pdir, "example-snapshotter.json"), "w") as f:
        json.dump({"snapshotDir": snaps}, f)
    plugin(pdir, "exits-early", "read req || exit 0\necho 'cannot reach the array' >&2\nexit 7\n")
    plugin(pdir, "garbage", "read req || exit 0\necho 'Segmentation fault (core dumped)'\nsleep 30\n")
    plugin(pdir, "hangs", "read req || exit 0\necho '{\"type\":\"progress\",\"bytesDone\":1,\"totalBytes\":9}'\n"
                          "sleep 1000\n")
    vols = t.mkdir("volumes")
    for pv, ann in (("pv-ex", "example-snapshotter"), ("pv-early", "exits-early"),
                    ("pv-garbage", "garbage"), ("pv-hang", "hangs"), ("pv-builtin", "hostpath")):
        d = os.path.join(vols, pv)
        random_dir(d, 1, 7)
        add_volume(sim, pv, d, annotations={"cairn.io/volume-plugin": ann})
    port = free_port()
    srv = server(t, sim, extra=["--plugin-dir", pdir, "--plugin-timeout", "1s",
                                "--listen", "127.0.0.1:%d" % port])
    create_backup(sim, "bp")
    phase = sample_until_final(sim, "bp", srv, timeout=120)
    t.eq(phase, "PartiallyFailed", "backup with failed volumes")
    got = vpbs(sim, "bp")
    want = {"pv-ex": "Completed", "pv-builtin": "Completed", "pv-early": "Failed",
            "pv-garbage": "Failed", "pv-hang": "Failed"}
    t.eq({k: v["status"]["phase"] for k, v in got.items()}, want, "phases")
    msg = {k: v["status"].get("message", "") for k, v in got.items()}
    t.check("exited with status 7" in msg["pv-early"] and "cannot reach the array" in msg["pv-early"],
            "early exit message: %r" % msg["pv-early"])
    t.check("not a JSON object" in msg["pv-garbage"], "garbage message: %r" % msg["pv-garbage"])
    t.check("idle timeout" in msg["pv-hang"], "hang message: %r" % msg["pv-hang"])
    ex = got["pv-ex"]["status"]
    t.eq(got["pv-ex"]["spec"]["provider"], "example-snapshotter", "provider")
    t.check(ex.get("snapshotID", "").startswith("pv-ex-"), "snapshot id %r" % ex.get("snapshotID"))
    t.check(os.path.exists(ex.get("backupProperties", {}).get("file", "/nonexistent")),
            "the example plugin's tarball exists: %r" % ex.get("backupProperties"))
    t.eq(ex["progress"]["bytesDone"], ex["progress"]["totalBytes"], "example plugin progress")
    t.check(srv.alive(), "server still running")
    # /metrics counts the volume operations (when this build serves it).
    if "not built into this server" not in srv.output():
        m = wait_for(lambda: urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                                    timeout=5).read().decode(), 10, "/metrics")
        vals = {}
        for line in m.splitlines():
            if line.startswith("cairn_volume_snapshot_"):
                k, v = line.rsplit(" ", 1)
                vals[k] = float(v)
        # Velero's schedule label: "" for a backup made by hand
        t.eq((vals.get('cairn_volume_snapshot_attempt_total{schedule=""}'),
              vals.get('cairn_volume_snapshot_success_total{schedule=""}'),
              vals.get('cairn_volume_snapshot_failure_total{schedule=""}')), (5.0, 2.0, 3.0),
             "volume metrics: %s" % vals)

    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    t.check("sleep 1000" not in out, "the hung plugin's group was killed")
    b = sim.ok("GET", "%s/bp" % BK)
    t.check(b["status"].get("errors", 0) >= 3, "backup counts the failed volumes: %s" % b["status"])
    srv.stop()
    # Deleting the backup: the plugin deletes its snapshot, the objects go.
    r = subprocess.run([os.path.join(BUILDDIR, "tests", "helpers", "volume_tool"), "delete-backup",
                        sim.kubeconfig, NS, pdir, "bp"], capture_output=True, text=True)
    t.eq((r.returncode, r.stdout.strip()), (0, "failed 0"), "delete-backup (%s)" % r.stderr[-1000:])
    t.check(not os.path.exists(ex["backupProperties"]["file"]), "example snapshot deleted")
    t.eq(vpbs(sim, "bp"), {}, "VolumePluginBackups deleted")


@case
def kill9_during_copy_resumes(t):
    sim, store = setup(t)
    vols = t.mkdir("volumes")
    big = os.path.join(vols, "pv-resume")
    random_dir(big, max(TOTAL_MB / 2, 60), 11)
    add_volume(sim, "pv-resume", big)
    journal = t.path("journal-s1.db")
    srv = server(t, sim, journal=journal)
    create_backup(sim, "bk")

    def mid_copy():
        v = vpbs(sim, "bk").get("pv-resume")
        st = (v or {}).get("status", {})
        p = st.get("progress", {})
        return st.get("checkpoint") and 0 < p.get("bytesDone", 0) < 0.9 * p.get("totalBytes", 1)
    ended = sample_until_final(sim, "bk", srv, stop_when=mid_copy)
    t.check(ended is None, "the copy ended before it could be interrupted (raise CAIRN_VOLUME_TEST_MB)")
    srv.kill9()
    before = vpbs(sim, "bk")["pv-resume"]["status"]
    t.check(before["phase"] == "InProgress", "killed while InProgress")
    ck = before["checkpoint"]
    srv2 = server(t, sim, journal=journal)
    samples = {}
    phase = sample_until_final(sim, "bk", srv2, samples=samples)
    t.eq(phase, "Completed", "backup after restart")
    # The journal is written before status (status at most once a second),
    # so the restart may resume from a later part than status showed.
    m = re.search(r"resuming \S+ after part (\d+) \(last file ([^)]*)\)", srv2.output())
    t.check(m is not None, "the restart resumed the copy: %s" % srv2.output()[-1500:])
    t.check(int(m.group(1)) >= ck["parts"],
            "resumed at or after the checkpoint in status (part %s, %r): part %s, %r" % (
                ck["parts"], ck["lastFile"], m.group(1), m.group(2)))
    seq = [d for d, _ in samples.get("pv-resume", [])]
    t.check(seq and seq[0] >= ck["bytesDone"], "progress resumed from the checkpoint, not 0: %s" % seq[:5])
    v = vpbs(sim, "bk")["pv-resume"]["status"]
    t.eq(v["phase"], "Completed", "volume phase")
    t.check(int(v["backupProperties"]["parts"]) > ck["parts"], "parts kept and added")
    x = os.path.join(t.mkdir("x"), "v")
    extract_stored(t, store, "bk", "pv-resume", x)
    same_tree(t, big, x)
    srv2.stop()


@case
def node_agents_claim_their_nodes_work(t):
    sim, store = setup(t)
    vols = t.mkdir("volumes")
    for pv in ("pv-a", "pv-b", "pv-pod"):
        random_dir(os.path.join(vols, pv), 1, 3)
    add_volume(sim, "pv-a", os.path.join(vols, "pv-a"), kind="local", node="node-a")
    add_volume(sim, "pv-pod", os.path.join(vols, "pv-pod"), pod_node="node-a")
    add_volume(sim, "pv-b", os.path.join(vols, "pv-b"), node="node-b")
    srv = server(t, sim, extra=["--volume-claim-timeout", "3s"])
    agent = t.spawn([BIN, "node-agent", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                     "--node-name", "node-a", "--server-id", "agent-a",
                     "--journal", t.path("agent.db"), "--retry-period", "200ms"], name="agent-a")
    create_backup(sim, "bn")
    phase = sample_until_final(sim, "bn", srv, timeout=60)
    t.eq(phase, "PartiallyFailed", "node-b has no agent")
    got = vpbs(sim, "bn")
    for pv in ("pv-a", "pv-pod"):
        v = got[pv]
        t.eq(v["metadata"]["labels"].get("cairn.io/node"), "node-a", "%s node label" % pv)
        t.eq(v["status"]["phase"], "Completed", "%s phase" % pv)
        t.eq(v["status"]["claim"]["holder"], "agent-a", "%s claimed by the node-agent" % pv)
    b = got["pv-b"]
    t.eq(b["metadata"]["labels"].get("cairn.io/node"), "node-b", "node-b label")
    t.eq(b["status"]["phase"], "Failed", "unclaimed work fails")
    t.check("no cairn node-agent on node node-b" in b["status"].get("message", ""), b["status"])
    t.check(agent.alive(), "agent alive")
    agent.stop()
    srv.stop()



@case
def deleting_a_backup_deletes_its_volume_snapshots(t):
    """GC (kubectl delete) and `cairn backup delete` both have the plugin
    delete its snapshot and delete the VolumePluginBackups before the
    backup's folder goes; a plugin that cannot delete keeps the folder."""
    sim, store = setup(t)
    pdir = t.mkdir("plugins")
    shutil.copy(os.path.join(SRCDIR, "plugins", "example-snapshotter"), pdir)
    snaps = t.mkdir("example-snaps")
    with open(os.path.join(pdir, "example-snapshotter.json"), "w") as f:
        json.dump({"snapshotDir": snaps}, f)
    vols = t.mkdir("volumes")
    for pv, ann in (("pv-ex", "example-snapshotter"), ("pv-builtin", "hostpath")):
        random_dir(os.path.join(vols, pv), 0.2, 3)
        add_volume(sim, pv, os.path.join(vols, pv), annotations={"cairn.io/volume-plugin": ann})
    srv = server(t, sim, extra=["--plugin-dir", pdir])
    snapfiles = {}
    for name in ("by-gc", "by-cli", "kept"):
        create_backup(sim, name)
        t.eq(sample_until_final(sim, name, srv, timeout=60), "Completed", "backup " + name)
        ex = vpbs(sim, name)["pv-ex"]["status"]
        snapfiles[name] = ex["backupProperties"]["file"]
        t.check(os.path.exists(snapfiles[name]), "snapshot of %s exists" % name)

    def folder(name):
        return [f for d, _, fs in os.walk(store) for f in fs if "/backups/%s/" % name in os.path.join(d, f)]

    # kubectl delete: the server's GC cleans up, the object goes last.
    sim.kubectl("delete", "backups.cairn.io", "by-gc", "-n", NS, "--wait=false")
    wait_for(lambda: sim.get(BK + "/by-gc")[0] == 404, 30, "deleted backup released by GC")
    t.check(not os.path.exists(snapfiles["by-gc"]), "GC had the plugin delete the snapshot")
    t.eq(vpbs(sim, "by-gc"), {}, "GC deleted the VolumePluginBackups")
    t.eq(folder("by-gc"), [], "GC removed the backup's folder")
    srv.stop()

    # The CLI, no server running: same end.
    r = subprocess.run([BIN, "backup", "delete", "by-cli", "--confirm", "--plugin-dir", pdir,
                        "--kubeconfig", sim.kubeconfig, "--namespace", NS],
                       capture_output=True, text=True, timeout=60)
    t.eq(r.returncode, 0, "cairn backup delete: %s" % r.stderr)
    t.check(not os.path.exists(snapfiles["by-cli"]), "the CLI had the plugin delete the snapshot")
    t.eq(vpbs(sim, "by-cli"), {}, "the CLI deleted the VolumePluginBackups")
    t.eq(folder("by-cli"), [], "the CLI removed the backup's folder")
    t.eq(sim.get(BK + "/by-cli")[0], 404, "the Backup is gone (finalizer released by the CLI)")

    # Without the plugin the snapshot cannot be deleted: nothing else goes.
    n = len(folder("kept"))
    r = subprocess.run([BIN, "backup", "delete", "kept", "--confirm",
                        "--kubeconfig", sim.kubeconfig, "--namespace", NS],
                       capture_output=True, text=True, timeout=60)
    t.eq(r.returncode, 1, "delete without the plugin: %s" % r.stderr)
    t.check("1 volume snapshot could not be deleted" in r.stderr, r.stderr)
    t.check(os.path.exists(snapfiles["kept"]), "snapshot kept")
    t.eq(len(folder("kept")), n, "the folder (the record of the snapshot id) is kept")
    t.eq(sim.get(BK + "/kept")[0], 200, "the Backup is kept")


# ---- Takeover and fencing of volume work (docs/protocol.md, "Volume work") ----

LEASE = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"]
STATUS_RE = re.compile(r"^/apis/cairn\.io/v1/namespaces/%s/(volumepluginbackups|volumepluginrestores|backups)/" % NS)


def agent(t, sim, aid, node="node-a", log_level="info"):
    """A node-agent talking through its own token (kubesim context kubesim-<aid>)."""
    return t.spawn([BIN, "node-agent", "--kubeconfig", sim.kubeconfig, "--context", "kubesim-" + aid,
                    "--namespace", NS, "--node-name", node, "--server-id", aid,
                    "--journal", t.path("journal-%s.db" % aid), "--part-size", str(1 << 20),
                    "--log-level", log_level] + LEASE, name="agent-" + aid)


def restore_and_wait(sim, runner, name, backup):
    """Create Restore name of backup and wait (240 s) for its final phase,
    failing at once if the restore runner exits."""
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": name, "namespace": NS},
                        "spec": {"backupName": backup}})

    def restored():
        if not runner.alive():
            raise CheckFailed("restore runner exited: %s" % runner.output()[-2000:])
        r = sim.ok("GET", "%s/%s" % (RS, name))
        return r if r.get("status", {}).get("phase") in FINAL else None
    return wait_for(restored, 240, "restore " + name)


def vpb_status(sim, backup, pv):
    return (vpbs(sim, backup).get(pv) or {}).get("status", {})


def takeover_setup(t, name):
    sim, store = setup(t, tokens={"admin": "admin-token", "s1": "tok-s1", "ax": "tok-ax", "ay": "tok-ay"})
    vols = t.mkdir("volumes")
    data = os.path.join(vols, "pv-take")
    random_dir(data, max(TOTAL_MB / 2, 60), 13)
    add_volume(sim, "pv-take", data, node="node-a")
    srv = server(t, sim)
    x = agent(t, sim, "ax")
    wait_for(lambda: sim.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/cairn-ax" % NS)[0] == 200,
             20, "ax's Lease")
    create_backup(sim, name)
    wait_for(lambda: vpb_status(sim, name, "pv-take").get("claim", {}).get("holder") == "ax", 30,
             "ax claims the copy")
    # the second agent of node-a starts after the claim: it may only take over
    y = agent(t, sim, "ay")
    wait_for(lambda: sim.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/cairn-ay" % NS)[0] == 200,
             20, "ay's Lease")

    def mid_copy():
        st = vpb_status(sim, name, "pv-take")
        p = st.get("progress", {})
        if st.get("phase") in FINAL:
            raise CheckFailed("the copy ended before it could be interrupted (raise CAIRN_VOLUME_TEST_MB)")
        return st if st.get("checkpoint") and 0 < p.get("bytesDone", 0) < 0.7 * p.get("totalBytes", 1) else None
    wait_for(mid_copy, 120, "ax mid-copy with a checkpoint in status", interval=0.02)
    return sim, store, srv, x, y, data


def check_taken_over(t, sim, store, name, y, data, ck):
    phase = sample_until_final(sim, name, None, timeout=240)
    t.eq(phase, "Completed", "backup phase after the takeover")
    st = vpb_status(sim, name, "pv-take")
    t.eq(st["phase"], "Completed", "volume phase (%s)" % st.get("message"))
    t.eq((st["claim"]["holder"], st["claim"]["attempt"]), ("ay", 2), "final claim")
    out = y.output()
    t.check(re.search(r"VolumePluginBackup %s-pv-take: taken over from ax \(attempt 2\)" % name, out),
            "ay logs the takeover: %s" % out[-1500:])
    m = re.search(r"resuming \S+ after part (\d+) \(last file ([^)]*)\)", out)
    t.check(m is not None, "ay resumed the copy from storage: %s" % out[-1500:])
    t.eq((int(m.group(1)), m.group(2)), (ck["parts"], ck["lastFile"]),
         "ay resumed from the checkpoint ax published")
    g = re.search(r"parts (\d+)\.\.(\d+) left out, continuing at part (\d+)", out)
    t.check(g is not None and int(g.group(1)) == ck["parts"] + 1 and int(g.group(3)) == int(g.group(2)) + 1,
            "ay leaves ax's later part numbers unused: %s" % (g.group(0) if g else out[-1500:]))
    x = os.path.join(t.mkdir("x-" + name), "v")
    extract_stored(t, store, name, "pv-take", x)
    same_tree(t, data, x)
    return int(g.group(3))


@case
def dead_node_agent_is_taken_over(t):
    sim, store, srv, x, y, data = takeover_setup(t, "bt")
    x.kill9()
    t_kill = time.monotonic()
    ck = vpb_status(sim, "bt", "pv-take")["checkpoint"]

    def taken():
        st = vpb_status(sim, "bt", "pv-take")
        return st if st.get("claim", {}).get("holder") == "ay" else None
    st = wait_for(taken, 60, "ay to take the copy over", interval=0.05)
    print("# kill -9 to takeover of the volume copy: %.2fs (lease 3s)" % (time.monotonic() - t_kill))
    t.eq(st["claim"]["attempt"], 2, "attempt after the takeover")
    check_taken_over(t, sim, store, "bt", y, data, ck)
    t.eq(backup_phase(sim, "bt"), "Completed", "the Backup the volume belongs to completed")
    srv.stop()
    # Restored by cairn (the VolumePluginRestore runs on node-a: ay) into a
    # fresh directory: byte-identical to the original.
    sim.ok("DELETE", "/api/v1/namespaces/%s/persistentvolumeclaims/claim-pv-take" % APP)
    sim.ok("DELETE", "/api/v1/persistentvolumes/pv-take")
    runner = t.spawn([RUNNER, "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                      "--journal", t.path("restore.db"), "--server-id", "r1",
                      "--period-ms", "100"], name="runner")
    r = restore_and_wait(sim, runner, "rt", "bt")
    t.eq(r["status"]["phase"], "Completed", "restore phase (%s)" % r["status"])
    vpr = sim.ok("GET", "%s/rt-pv-take" % VPR)
    t.eq(vpr["status"]["claim"]["holder"], "ay", "the restore ran on node-a's live agent")
    newp = sim.ok("GET", "/api/v1/persistentvolumes/pv-take")["spec"]["hostPath"]["path"]
    t.eq(newp, data + "-rt", "the PV points at the restored data")
    same_tree(t, data, newp)
    runner.stop()
    y.stop()


@case
def stalled_node_agent_is_fenced(t):
    sim, store, srv, x, y, data = takeover_setup(t, "bf")
    watch = PartWatch(store, "/volumes/pv-take.index.tar.gz")
    t.on_cleanup(watch.close)
    x.signal(signal.SIGSTOP)
    t_stop = time.time()
    ck = vpb_status(sim, "bf", "pv-take")["checkpoint"]

    def taken():
        st = vpb_status(sim, "bf", "pv-take")
        return st if st.get("claim", {}).get("holder") == "ay" else None
    wait_for(taken, 60, "ay to take the copy over while ax is stopped", interval=0.05)
    t_take = time.time()
    time.sleep(0.5)
    x.signal(signal.SIGCONT)
    t_cont = time.time()
    print("# ax stopped %.2fs; taken over after %.2fs" % (t_cont - t_stop, t_take - t_stop))
    wait_for(lambda: re.search(r"claim lost to ay|ownership of VolumePluginBackup \S+ lost", x.output()),
             30, "ax to stand down after SIGCONT")
    cont_at = check_taken_over(t, sim, store, "bf", y, data, ck)
    watch.close()
    t.check(x.alive(), "ax keeps running (it stood down from one copy)")
    # kubesim: ax wrote nothing to any volume operation or backup after the
    # takeover (a write it had decided before SIGSTOP may only fail: 409)
    late = [(r["method"], r["path"], r["status"], round(r["time"] - t_take, 2)) for r in sim.requests()
            if r["token"] == "ax" and r["time"] > t_take and r["method"] in ("PUT", "POST", "PATCH", "DELETE")
            and STATUS_RE.match(r["path"])]
    t.check(all(code == 409 for _, _, code, _ in late) and len(late) <= 1,
            "ax's writes after the takeover: %s" % late)
    ok_ax = [r for r in sim.requests() if r["token"] == "ax" and r["time"] > t_stop and r["status"] // 100 == 2
             and r["method"] != "GET" and STATUS_RE.match(r["path"])]
    t.eq(ok_ax, [], "ax's successful writes after it was stopped")
    # storage: ax's part numbers end below ay's; after SIGCONT (plus the one
    # upload ax may have had in flight) no part file below ay's was written,
    # and no part ax checkpointed was ever rewritten
    late_parts = {n: v for n, v in watch.seen.items() if n < cont_at and v[1] > t_cont + 1.0}
    t.check(not late_parts, "part files below ay's first (%d) written after SIGCONT: %s" % (cont_at, late_parts))
    rewritten = {n: v for n, v in watch.seen.items() if n <= ck["parts"] and v[1] > t_stop + 0.5}
    t.check(not rewritten, "checkpointed parts rewritten: %s" % rewritten)
    t.check(any(n >= cont_at for n in watch.seen), "ay's parts seen: %s" % sorted(watch.seen))
    x.stop()
    y.stop()
    srv.stop()


main()

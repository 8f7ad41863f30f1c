"""Incremental volume copies (issue 25): a second backup of a hostPath
volume built on the first, end to end against kubesim and `cairn server`.

One case, in the order a user lives it:
  - a first backup stores the whole volume (its VolumePluginBackup says
    chunks/1, uploadedBytes, and progress.bytesUploaded);
  - 1% of the files change (4 KiB each, mtime set back: only ctime tells);
  - the second backup's server dies by SIGKILL right after its copy stored
    its second index part (crash point volume.after-part@2), another
    server takes the Backup and the copy over once the Lease expires, and
    finishes: the copy names the first backup as its parent and uploaded
    under 3% of the volume's bytes over all attempts;
  - both backups restore (by the server's restore controller, into fresh
    directories) byte-identical to the trees they were taken of;
  - `cairn backup delete` of the older backup frees chunk packs only it
    used, and the newer backup still restores byte-identical.
A second case does the same on S3 (s3rver), where index parts and packs
follow S3's part rules. Sizes are small (about 40 and 12 MiB); the 1 GiB
figures are `make bench`'s (tests/bench/bench_incremental.py).
"""
import json
import os
import re
import subprocess
import sys
import time

from cairntest import BIN, SRCDIR, case, main, wait_for, CheckFailed

NS = "cairn-system"
APP = "shop"
VPB = "/apis/cairn.io/v1/namespaces/%s/volumepluginbackups" % NS
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
TREE = os.path.join(SRCDIR, "tests", "helpers", "volume_tree.py")
LEASE = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"]
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
PV = "pv-data"


def tree(*args):
    r = subprocess.run([sys.executable, TREE] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed("volume_tree %s: %s" % (args[0], r.stdout + r.stderr))
    return r.stdout


def make_volume(path):
    """400 files of 96 KiB of random bytes, and the odd tree (links, modes, holes, names)."""
    os.makedirs(os.path.join(path, "files"))
    for i in range(400):
        with open(os.path.join(path, "files", "f%04d" % i), "wb") as f:
            f.write(os.urandom(96 << 10))
    tree("make", os.path.join(path, "odd"), "--mb", 2, "--seed", 4)


def setup(t):
    sim = t.kubesim(tokens={"admin": "admin-token", "s0": "tok-s0", "s1": "tok-s1", "s2": "tok-s2"})
    sim.install_crds(NS)
    store = t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": store}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APP}})
    data = os.path.join(t.mkdir("volumes"), PV)
    make_volume(data)
    sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": PV},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": data},
                 "claimRef": {"namespace": APP, "name": "data"}}})
    sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"volumeName": PV, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    return sim, store, data


def server(t, sim, sid, env=None):
    # 128 KiB parts and packs: a small copy still has several of each
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--context", "kubesim-" + sid,
                    "--namespace", NS, "--server-id", sid, "--journal", t.path("journal-%s.db" % sid),
                    "--part-size", str(128 << 10)] + LEASE,
                   name="server-" + sid, env=env)


def backup(sim, name):
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name, "namespace": NS},
                        "spec": {"includedNamespaces": [APP]}})


def phase(sim, kind_path, name):
    code, obj, _ = sim.get("%s/%s" % (kind_path, name))
    return (obj or {}).get("status", {}).get("phase") if code == 200 else None


def wait_final(sim, kind_path, name, timeout=180):
    return wait_for(lambda: phase(sim, kind_path, name) in FINAL and phase(sim, kind_path, name),
                    timeout, "%s %s to end" % (kind_path.rsplit("/", 1)[1], name), interval=0.2)


def vpb(sim, b):
    return sim.ok("GET", "%s/%s-%s" % (VPB, b, PV))


def restore(t, sim, name, b, want):
    """Restore backup b (its PV and claim deleted first) and compare with want."""
    sim.delete("/api/v1/namespaces/%s/persistentvolumeclaims/data" % APP)
    sim.delete("/api/v1/persistentvolumes/%s" % PV)
    wait_for(lambda: sim.get("/api/v1/persistentvolumes/%s" % PV)[0] == 404, 30, "the PV to go")
    sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                        "metadata": {"name": name, "namespace": NS}, "spec": {"backupName": b}})
    ph = wait_final(sim, RS, name)
    t.eq(ph, "Completed", "restore %s of %s (%s)" % (name, b, sim.ok("GET", "%s/%s" % (RS, name))["status"]))
    path = sim.ok("GET", "/api/v1/persistentvolumes/%s" % PV)["spec"]["hostPath"]["path"]
    r = subprocess.run([sys.executable, TREE, "compare", want, path], capture_output=True, text=True)
    t.check(r.returncode == 0, "restore %s of %s differs from its tree:\n%s" % (name, b, r.stdout[:2000]))
    return path


def packs(store):
    d = os.path.join(store, "plugins", "cairn-hostpath", PV, "packs")
    return {f: os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".pack")}


def data_bytes(root):
    """Bytes of the files' data on disk (holes left out): what a copy must read."""
    n = 0
    for d, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            if not os.path.islink(os.path.join(d, f)):
                n += min(st.st_size, st.st_blocks * 512)
    return n


@case
def incremental_copy_survives_kill_and_takeover(t):
    sim, store, data = setup(t)
    volume_bytes = data_bytes(data)

    # 1. the first copy stores everything
    s0 = server(t, sim, "s0")
    backup(sim, "b1")
    t.eq(wait_final(sim, BK, "b1"), "Completed", "first backup")
    v1 = vpb(sim, "b1")["status"]
    props1 = v1["backupProperties"]
    t.eq(props1.get("format"), "chunks/1", "the copy is deduplicated")
    t.eq(props1.get("parent"), "", "the first copy builds on nothing")
    t.check(int(props1["uploadedBytes"]) >= 0.9 * volume_bytes,
            "the first copy uploads the volume: %s of %d" % (props1["uploadedBytes"], volume_bytes))
    t.eq(v1["progress"]["bytesUploaded"], int(props1["uploadedBytes"]), "progress.bytesUploaded")
    s0.stop()
    v1_tree = os.path.join(t.mkdir("v1"), "tree")
    subprocess.run(["cp", "-a", data, v1_tree], check=True)

    # 2. 1% of the files change
    changed = tree("change", data, "--percent", 1, "--seed", 21).split()
    t.check(int(changed[0]) >= 4, "files changed: %s" % changed)

    # 3. the second copy's server dies after its second index part
    s1 = server(t, sim, "s1", env={"CAIRN_FAULT": "volume.after-part@2"})
    backup(sim, "b2")
    s1.wait(120)
    t.check(not s1.alive(), "s1 died at the crash point")
    st = vpb(sim, "b2")["status"]
    t.eq(st.get("phase"), "InProgress", "the copy was left InProgress (%s)" % st.get("message"))
    t.eq(st["claim"]["holder"], "s1", "s1 held the copy")
    seen_before = st.get("progress", {}).get("bytesDone", 0)
    t_kill = time.monotonic()

    # 4. another server takes the Backup and the copy over, and finishes
    s2 = server(t, sim, "s2")
    t.eq(wait_final(sim, BK, "b2"), "Completed", "second backup after the takeover")
    print("# kill -9 to the second backup's completion by s2: %.1fs" % (time.monotonic() - t_kill))
    v2 = vpb(sim, "b2")
    st = v2["status"]
    t.eq(st["phase"], "Completed", "copy phase (%s)" % st.get("message"))
    t.eq((st["claim"]["holder"], st["claim"]["attempt"]), ("s2", 2), "the copy was taken over")
    t.check("VolumePluginBackup b2-%s: taken over from s1 (attempt 2)" % PV in s2.output(),
            "s2 logs the takeover")
    props2 = st["backupProperties"]
    t.eq(props2.get("parent"), "b1", "the second copy builds on the first")
    up = int(props2["uploadedBytes"])
    print("# volume %d bytes of data; first copy uploaded %s, second %d (%.2f%%, %s bytes read, %s files unchanged)" %
          (volume_bytes, props1["uploadedBytes"], up, 100.0 * up / volume_bytes, props2["readBytes"],
           props2["unchangedFiles"]))
    t.check(up < 0.03 * volume_bytes, "the second copy uploaded %d bytes over its attempts, "
            "not under 3%% of %d" % (up, volume_bytes))
    t.check(st["progress"]["bytesDone"] >= seen_before, "progress resumed, not from 0")
    s2.stop()
    # what a user reads: the copy's row says what it covered and what it sent
    r = subprocess.run([BIN, "backup", "describe", "b2", "--kubeconfig", sim.kubeconfig, "--namespace", NS],
                       capture_output=True, text=True, timeout=60)
    t.eq(r.returncode, 0, "backup describe: %s" % r.stderr)
    row = [ln for ln in r.stdout.splitlines() if ln.strip().startswith(PV)]
    t.check(len(row) == 1 and re.search(r"/ [0-9.]+ [KMG]?i?B \([0-9.]+ [KMG]?i?B sent\)", row[0]),
            "describe shows the bytes sent beside the bytes covered: %s" % row)

    # 5. both restore byte-identical (the server's restore controller)
    s3 = server(t, sim, "s0")
    restore(t, sim, "r2", "b2", data)
    restore(t, sim, "r1", "b1", v1_tree)

    # 6. deleting the older backup frees only what it alone used
    before = packs(store)
    r = subprocess.run([BIN, "backup", "delete", "b1", "--confirm", "--kubeconfig", sim.kubeconfig,
                        "--namespace", NS],
                       capture_output=True, text=True, timeout=120)
    t.eq(r.returncode, 0, "backup delete: %s%s" % (r.stdout, r.stderr))
    t.check("chunk packs" in r.stdout, "the CLI says packs were freed: %s" % r.stdout)
    after = packs(store)
    t.check(set(after) < set(before), "packs freed: %d of %d" % (len(before) - len(after), len(before)))
    refs = os.path.join(store, "plugins", "cairn-hostpath", PV, "refs")
    with open(os.path.join(refs, "b2.json")) as f:
        kept = set(json.load(f)["packs"])
    t.check(kept <= set(after), "every pack b2 uses is kept: %s" % sorted(kept - set(after)))
    t.check(not os.path.exists(os.path.join(refs, "b1.json")), "b1's refs are gone")
    restore(t, sim, "r3", "b2", data)
    s3.stop()


@case
def incremental_copy_to_s3(t):
    """The same on S3 (parts of 5 MiB at least: the index is cut at the part
    size, packs are single puts): the second copy sends under 3% of the
    volume, deleting the first frees the packs only it used (its files were
    deleted since) and the second still restores byte-identical."""
    from s3rver import S3rver
    from bkworld import World
    s3 = S3rver(t)
    w = World(t)
    w.s3_location(s3)
    w.namespace(APP)
    data = os.path.join(t.mkdir("volumes"), PV)
    os.makedirs(os.path.join(data, "files"))
    for i in range(120):
        with open(os.path.join(data, "files", "f%04d" % i), "wb") as f:
            f.write(os.urandom(96 << 10))
    tree("make", os.path.join(data, "odd"), "--mb", 1, "--seed", 6)
    w.sim.ok("POST", "/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": PV},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": data},
                 "claimRef": {"namespace": APP, "name": "data"}}})
    w.sim.ok("POST", "/api/v1/namespaces/%s/persistentvolumeclaims" % APP, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"volumeName": PV, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}})
    volume_bytes = data_bytes(data)
    srv = w.server(part_size=5 << 20)
    w.create_backup("b1", {"includedNamespaces": [APP]})
    t.eq(w.wait_backup("b1", srv=srv)["status"]["phase"], "Completed", "first backup")
    for i in range(90):     # the first files go: the packs holding only them are b1's alone
        os.unlink(os.path.join(data, "files", "f%04d" % i))
    changed = tree("change", data, "--percent", 5, "--seed", 23).split()
    t.check(int(changed[0]) >= 2, "files changed: %s" % changed)
    w.create_backup("b2", {"includedNamespaces": [APP]})
    t.eq(w.wait_backup("b2", srv=srv)["status"]["phase"], "Completed", "second backup")
    props = vpb(w.sim, "b2")["status"]["backupProperties"]
    t.eq(props.get("parent"), "b1", "the second copy builds on the first")
    up = int(props["uploadedBytes"])
    print("# s3: volume %d bytes, second copy uploaded %d (%.2f%%)" % (volume_bytes, up, 100.0 * up / volume_bytes))
    t.check(up < 0.03 * volume_bytes, "the second copy sent %d bytes, not under 3%% of %d" % (up, volume_bytes))
    keys = s3.storage_tool("list", "pfx/plugins/cairn-hostpath/%s/packs/" % PV).stdout.decode().split()
    packs_before = {k for k in keys if k.endswith(".pack")}
    t.check(packs_before, "packs in the bucket: %s" % keys[:5])
    d = subprocess.run([BIN, "backup", "delete", "b1", "--confirm", "--kubeconfig", w.sim.kubeconfig,
                        "--namespace", NS], capture_output=True, text=True, timeout=120)
    t.eq(d.returncode, 0, "backup delete: %s%s" % (d.stdout, d.stderr))
    keys = s3.storage_tool("list", "pfx/plugins/cairn-hostpath/%s/packs/" % PV).stdout.decode().split()
    packs_after = {k for k in keys if k.endswith(".pack")}
    t.check(packs_after < packs_before, "packs freed on S3: %s" % d.stdout)
    s3.storage_tool("get", "pfx/plugins/cairn-hostpath/%s/refs/b2.json" % PV, t.path("b2.json"))
    with open(t.path("b2.json")) as f:
        kept = {"pfx/plugins/cairn-hostpath/%s/packs/%s" % (PV, n) for n in json.load(f)["packs"]}
    t.check(kept and kept <= packs_after, "every pack b2 uses is kept: %s" % sorted(kept - packs_after))
    restore(t, w.sim, "r3", "b2", data)


main()

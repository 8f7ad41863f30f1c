"""`cairn backup ...` as a user meets it, against kubesim: create writes the
spec the engine reads, get/describe show what the server published, --wait
follows a backup to its final phase (the test plays the server by writing
status through the status subresource), logs/download/delete work on a
local-directory storage location laid out by hand in Velero's layout."""
import glob
import gzip
import io
import json
import os
import signal
import subprocess
import tarfile
import time

import yaml

from cairntest import case, main, cairn, wait_for, SRCDIR, BIN

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS


def setup(t, kubectl=False):
    """kubesim with cairn's CRDs and the cairn-system namespace."""
    sim = t.kubesim()
    if kubectl:
        sim.kubectl("apply", "-f", os.path.join(SRCDIR, "schema/crds/"))
    else:
        for path in sorted(glob.glob(os.path.join(SRCDIR, "schema/crds/*.yaml"))):
            with open(path) as f:
                for doc in yaml.safe_load_all(f):
                    if doc:
                        sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NS}})
    wait_for(lambda: sim.get(BK)[0] == 200, 10, "backups resource served")
    return sim


def cli(sim, *args, **kw):
    return cairn(*(list(args) + ["--kubeconfig", sim.kubeconfig]), **kw)


def set_status(sim, name, status):
    return sim.ok("PATCH", "%s/%s/status" % (BK, name), {"status": status},
                  content_type="application/merge-patch+json")


def get_backup(sim, name):
    return sim.ok("GET", "%s/%s" % (BK, name))


def add_fs_location(sim, name, path, prefix="", default=False, access=None):
    spec = {"provider": "fs", "config": {"path": path}, "objectStorage": {"bucket": "local"},
            "default": default}
    if access:
        spec["accessMode"] = access
    if prefix:
        spec["objectStorage"]["prefix"] = prefix
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": name}, "spec": spec})


def selector_parts(sel):
    """A metav1.LabelSelector as a comparable set of requirements."""
    out = set()
    for k, v in (sel.get("matchLabels") or {}).items():
        out.add((k, "In", (v,)))
    for e in sel.get("matchExpressions") or []:
        out.add((e["key"], e["operator"], tuple(sorted(e.get("values") or ()))))
    return out


@case
def create_writes_the_spec(t):
    sim = setup(t, kubectl=True)
    add_fs_location(sim, "edge", t.path("store"))
    r = cli(sim, "backup", "create", "b1", "--include-namespaces", "app,web",
            "--exclude-namespaces", "kube-*", "--include-resources", "deployments.apps,configmaps",
            "--exclude-resources", "secrets", "--include-cluster-resources", "false",
            "-l", "app=web,tier in (a,b),!old,env!=dev,zone", "--ttl", "72h",
            "--storage-location", "edge", "--snapshot-volumes", "false")
    t.eq(r.returncode, 0, "exit code (stderr %r)" % r.stderr)
    t.check('Backup request "b1" submitted successfully' in r.stdout, r.stdout)
    t.eq(get_backup(sim, "b1")["metadata"].get("finalizers"), ["cairn.io/backup-cleanup"],
         "created with the cleanup finalizer (kubectl delete waits for storage cleanup)")
    spec = get_backup(sim, "b1")["spec"]
    t.eq(spec["includedNamespaces"], ["app", "web"], "includedNamespaces")
    t.eq(spec["excludedNamespaces"], ["kube-*"], "excludedNamespaces")
    t.eq(spec["includedResources"], ["deployments.apps", "configmaps"], "includedResources")
    t.eq(spec["excludedResources"], ["secrets"], "excludedResources")
    t.eq(spec["includeClusterResources"], False, "includeClusterResources")
    t.eq(spec["ttl"], "72h", "ttl")
    t.eq(spec["storageLocation"], "edge", "storageLocation")
    t.eq(spec["snapshotVolumes"], False, "snapshotVolumes")
    t.eq(spec["labelSelector"].get("matchLabels"), {"app": "web"}, "matchLabels")
    t.eq(selector_parts(spec["labelSelector"]),
         {("app", "In", ("web",)), ("tier", "In", ("a", "b")), ("old", "DoesNotExist", ()),
          ("env", "NotIn", ("dev",)), ("zone", "Exists", ())}, "labelSelector requirements")
    # kubectl sees the object too (printer columns come from the CRD).
    out = sim.kubectl("get", "backups.cairn.io", "-n", NS).stdout
    t.check("b1" in out, out)

    # Defaults: Velero's 30 days, nothing else set.
    r = cli(sim, "backup", "create", "b2")
    t.eq(r.returncode, 0, "exit code of a bare create: %r" % r.stderr)
    spec = get_backup(sim, "b2")["spec"]
    t.eq(spec, {"ttl": "720h"}, "spec of a bare create")

    r = cli(sim, "backup", "create", "b2")
    t.eq(r.returncode, 1, "creating it twice")
    t.eq(r.stderr.strip(), "cairn: backup b2 already exists in namespace cairn-system", "message")
    r = cli(sim, "backup", "create", "b3", "--storage-location", "nowhere")
    t.eq(r.returncode, 1, "unknown storage location")
    t.check('storage location "nowhere" not found' in r.stderr, r.stderr)
    t.eq(sim.get(BK + "/b3")[0], 404, "no backup made for an unknown location")


@case
def create_rejects_bad_input_with_exit_2(t):
    sim = setup(t)
    bad = [
        (["-l", "app in (a"], "invalid label selector"),
        (["-l", "a b c"], "invalid label selector"),
        (["--ttl", "3 days"], "--ttl"),
        (["--ttl", "-5h"], "--ttl"),
        (["--include-cluster-resources", "maybe"], "--include-cluster-resources"),
        (["--snapshot-volumes", "sometimes"], "--snapshot-volumes"),
    ]
    for extra, want in bad:
        r = cli(sim, "backup", "create", "bad", *extra)
        t.eq(r.returncode, 2, "exit code for %r (stderr %r)" % (extra, r.stderr))
        first = r.stderr.splitlines()[0]
        t.check(first.startswith("cairn: ") and want in first, "message for %r: %r" % (extra, first))
    r = cli(sim, "backup", "create", "Bad_Name")
    t.eq(r.returncode, 2, "bad name")
    t.check("invalid backup name" in r.stderr, r.stderr)
    r = cli(sim, "backup", "create")
    t.eq(r.returncode, 2, "missing name")
    t.eq(sim.ok("GET", BK)["items"], [], "nothing was created")


@case
def get_table_json_and_yaml(t):
    sim = setup(t)
    for n in ("b1", "b2", "b3"):
        t.eq(cli(sim, "backup", "create", n).returncode, 0, "create " + n)
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3 * 86400 + 60))
    set_status(sim, "b2", {"phase": "InProgress", "progress": {"totalItems": 10, "itemsBackedUp": 5,
                                                               "bytesDone": 2048},
                           "claim": {"holder": "srv-a", "worker": "srv-a/1", "attempt": 2,
                                     "claimedAt": "2026-01-01T00:00:00Z"}})
    # Strings a YAML reader could take for something else must come back as strings.
    tricky = {"a": "yes", "b": "0x1F", "c": "1:30", "d": "2026-01-01", "e": "~", "f": "two\nlines",
              "g": "1e3", "h": "-.5", "i": "", "j": "NO", "k": "'quoted' \"x\"", "l": "#x", "m": "a: b",
              "n": "[1]", "o": "é ✓", "p": "0o17", "q": "720h", "r": "null"}
    sim.ok("PATCH", BK + "/b1", {"metadata": {"annotations": tricky}},
           content_type="application/merge-patch+json")
    set_status(sim, "b3", {"phase": "Completed", "errors": 1, "warnings": 4, "expiration": future,
                           "progress": {"totalItems": 7, "itemsBackedUp": 7}})
    r = cli(sim, "backup", "get")
    t.eq(r.returncode, 0, "exit code: %r" % r.stderr)
    lines = r.stdout.splitlines()
    t.eq(len(lines), 4, "header and three rows: %r" % r.stdout)
    header = lines[0]
    for col in ("NAME", "STATUS", "ITEMS", "HOLDER", "ATTEMPT", "STORAGE LOCATION", "AGE", "EXPIRES"):
        t.check(col in header, "column %s in %r" % (col, header))
    # Columns are aligned: each header word starts where its cells start.
    start = header.index("HOLDER")
    t.eq(lines[2][start:].split()[0], "srv-a", "HOLDER column of b2 is aligned")
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    t.eq(rows["b1"][1], "Waiting", "an unclaimed New backup shows as waiting")
    t.eq(rows["b2"][1:5], ["InProgress", "5/10", "srv-a", "2"], "b2 row")
    t.eq(rows["b3"][1:3], ["Completed", "7/7"], "b3 row")
    t.check(lines[3].split()[-1] in ("3d", "2d23h"), "EXPIRES of b3: %r" % lines[3])
    t.check(rows["b1"][-2].endswith("s"), "AGE in kubectl style: %r" % rows["b1"])

    r = cli(sim, "backup", "get", "b2", "-o", "json")
    t.eq(r.returncode, 0, "exit code of -o json")
    obj = json.loads(r.stdout)
    t.eq((obj["metadata"]["name"], obj["status"]["claim"]["holder"]), ("b2", "srv-a"), "json object")

    rj = cli(sim, "backup", "get", "-o", "json")
    ry = cli(sim, "backup", "get", "-o", "yaml")
    t.eq((rj.returncode, ry.returncode), (0, 0), "exit codes of list output")
    lj = json.loads(rj.stdout)
    ly = yaml.safe_load(ry.stdout)
    t.eq(lj["kind"], "List", "list kind")
    t.eq([i["metadata"]["name"] for i in lj["items"]], ["b1", "b2", "b3"], "list items")
    t.eq(ly, lj, "YAML reads back to the same document as JSON")
    t.eq(ly["items"][0]["metadata"]["annotations"], tricky, "tricky strings survive YAML")
    t.eq(ly["items"][2]["status"]["expiration"], future, "timestamps stay strings in YAML")

    r = cli(sim, "backup", "get", "nope")
    t.eq(r.returncode, 1, "missing backup")
    t.eq(r.stderr.strip(), 'cairn: backup "nope" not found in namespace cairn-system', "message")
    r = cli(sim, "backup", "get", "-o", "xml")
    t.eq(r.returncode, 2, "bad output format")
    r = cli(sim, "backup", "get", "-n", "empty")
    t.eq((r.returncode, r.stdout), (0, ""), "no backups: nothing on stdout")
    t.check("No backups found" in r.stderr, r.stderr)


@case
def describe_shows_claim_checkpoint_and_keys(t):
    sim = setup(t)
    add_fs_location(sim, "default", t.path("store"), prefix="edge/site1", default=True)
    t.eq(cli(sim, "backup", "create", "b1", "-l", "app=web", "--include-namespaces", "shop").returncode,
         0, "create")
    set_status(sim, "b1", {
        "phase": "InProgress", "startTimestamp": "2026-01-01T00:00:00Z",
        "progress": {"totalItems": 500, "itemsBackedUp": 120, "bytesDone": 3 * 1048576},
        "claim": {"holder": "srv-b", "worker": "srv-b/3", "attempt": 2,
                  "claimedAt": "2026-01-01T00:00:05Z"},
        "checkpoint": {"uploadID": "upl-777", "itemsDone": 100, "parts": [
            {"number": 1, "etag": "etag-one", "lastItem": "apps/deployments/shop/api",
             "items": 60, "bytes": 5242880},
            {"number": 2, "etag": "etag-two", "lastItem": "/configmaps/shop/zz",
             "items": 40, "bytes": 1024}]},
        "conditions": [{"type": "Claimed", "status": "True", "reason": "Takeover",
                        "message": "lease of srv-a expired", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
    })
    r = cli(sim, "backup", "describe", "b1")
    t.eq(r.returncode, 0, "exit code: %r" % r.stderr)
    out = r.stdout
    for want in ("Name:        b1", "Phase:  InProgress", "Included:       shop",
                 "Label selector:    app=web", "Storage location:  <default>",
                 "Holder:      srv-b", "Worker:      srv-b/3", "Attempt:     2",
                 "2026-01-01T00:00:05Z", "Upload ID:   upl-777", "Items done:  100",
                 "etag-one", "etag-two", "apps/deployments/shop/api", "configmaps/shop/zz",
                 "120/500", "3.0 MiB", "Takeover", "lease of srv-a expired"):
        t.check(want in out, "describe lacks %r:\n%s" % (want, out))
    # a core resource's key starts with its empty group: shown without it
    t.check(" /configmaps/shop/zz" not in out, "the empty group of a core key shown:\n%s" % out)
    # The files in storage: only those that exist, with their sizes.
    t.check("Files in storage (location default" in out and "  <none>" in out,
            "nothing stored yet:\n%s" % out)
    lay_out_backup(t.path("store"), "edge/site1", "b1", "log\n")
    out = cli(sim, "backup", "describe", "b1").stdout
    for want in ("edge/site1/backups/b1/b1.tar.gz", "edge/site1/backups/b1/velero-backup.json",
                 "edge/site1/backups/b1/b1-logs.gz", "edge/site1/backups/b1/b1-resource-list.json.gz"):
        t.check(want in out, "describe lacks %r:\n%s" % (want, out))
    for never in ("podvolumebackups", "itemoperations", "volumeinfo", "volumesnapshots"):
        t.check(never not in out, "describe names %s, which was never written:\n%s" % (never, out))

    set_status(sim, "b1", {"phase": "FailedValidation", "claim": None, "checkpoint": None,
                           "validationErrors": ["namespace shop is both included and excluded"]})
    r = cli(sim, "backup", "describe", "b1")
    t.check("namespace shop is both included and excluded" in r.stdout, r.stdout)
    # Text from the cluster cannot drive the terminal or forge lines.
    set_status(sim, "b1", {"phase": "Failed", "failureReason": "disk\x1b[2J gone\nPhase:  Completed"})
    r = cli(sim, "backup", "describe", "b1")
    t.check("\x1b" not in r.stdout and "disk\\x1b[2J gone\\nPhase:  Completed" in r.stdout,
            "escaped failure reason: %r" % r.stdout[:600])
    t.eq([ln for ln in r.stdout.splitlines() if ln.startswith("Phase:")], ["Phase:  Failed"], "one phase line")
    r = cli(sim, "backup", "describe", "nope")
    t.eq(r.returncode, 1, "describe of a missing backup")


def spawn_wait(t, sim, name, *extra):
    """`cairn backup create NAME --wait` in the background, stderr to a file."""
    errf = open(t.path("wait-%s.err" % name), "wb")
    outf = open(t.path("wait-%s.out" % name), "wb")
    p = subprocess.Popen([BIN, "backup", "create", name, "--wait", "--kubeconfig", sim.kubeconfig]
                         + list(extra), stdout=outf, stderr=errf, stdin=subprocess.DEVNULL)
    t.on_cleanup(lambda: (p.poll() is None and p.kill(), p.wait(), errf.close(), outf.close()))
    wait_for(lambda: sim.get("%s/%s" % (BK, name))[0] == 200, 10, "backup %s created" % name)
    return p


def read(t, name):
    with open(t.path(name), "rb") as f:
        return f.read().decode("utf-8", "replace")


@case
def wait_follows_to_completed_with_plain_lines(t):
    sim = setup(t)
    p = spawn_wait(t, sim, "b1")
    # Nobody claims it: after a few seconds the CLI says it is waiting.
    wait_for(lambda: "waiting" in read(t, "wait-b1.err"), 10, "the waiting message")
    t.check("cairn server" in read(t, "wait-b1.err"), read(t, "wait-b1.err"))
    t.check(p.poll() is None, "still waiting")
    set_status(sim, "b1", {"phase": "InProgress", "claim": {"holder": "srv-a", "attempt": 1},
                           "progress": {"totalItems": 10, "itemsBackedUp": 3, "bytesDone": 1000}})
    wait_for(lambda: "3/10 items" in read(t, "wait-b1.err"), 10, "progress line with 3/10")
    for i in range(4, 11):
        set_status(sim, "b1", {"progress": {"itemsBackedUp": i, "bytesDone": 1000 * i}})
        time.sleep(0.3)
    set_status(sim, "b1", {"phase": "Completed", "completionTimestamp": "2026-01-01T00:01:00Z"})
    t.eq(p.wait(20), 0, "exit code of a Completed backup")
    err = read(t, "wait-b1.err")
    t.check("\r" not in err and "\033[" not in err, "no terminal controls when not a TTY: %r" % err)
    lines = [ln for ln in err.splitlines() if ln.startswith("backup b1: InProgress")]
    t.check(lines and "holder srv-a, attempt 1" in lines[0], "progress lines name the holder: %r" % err)
    # 7 updates over ~2 s: lines are rate-limited (phase changes excepted).
    t.check(len(lines) <= 5, "at most about one line a second: %r" % lines)
    t.check("Completed, 10/10 items" in err, "final line: %r" % err)
    t.check("completed" in read(t, "wait-b1.out"), read(t, "wait-b1.out"))


@case
def wait_exit_code_and_reason_of_failures(t):
    sim = setup(t)
    p = spawn_wait(t, sim, "f1")
    set_status(sim, "f1", {"phase": "InProgress", "claim": {"holder": "srv-a", "attempt": 1}})
    time.sleep(0.7)
    set_status(sim, "f1", {"phase": "Failed",
                           "failureReason": "storage location default is unreachable: connection refused"})
    t.eq(p.wait(20), 1, "exit code of a Failed backup")
    err = read(t, "wait-f1.err")
    t.check("cairn: backup f1 failed: storage location default is unreachable: connection refused" in err,
            err)

    p = spawn_wait(t, sim, "f2", "--include-namespaces", "a", "--exclude-namespaces", "a")
    set_status(sim, "f2", {"phase": "FailedValidation",
                           "validationErrors": ["namespace a is both included and excluded",
                                                "second problem"]})
    t.eq(p.wait(20), 1, "exit code of FailedValidation")
    err = read(t, "wait-f2.err")
    t.check("failed validation: namespace a is both included and excluded; second problem" in err, err)

    p = spawn_wait(t, sim, "f3")
    set_status(sim, "f3", {"phase": "PartiallyFailed", "errors": 2, "warnings": 1})
    t.eq(p.wait(20), 1, "exit code of PartiallyFailed")
    t.check("partially failed: 2 errors" in read(t, "wait-f3.err"), read(t, "wait-f3.err"))

    p = spawn_wait(t, sim, "f4")
    sim.ok("DELETE", BK + "/f4")
    t.eq(p.wait(20), 1, "exit code when the backup is deleted while waiting")
    t.check("deleted" in read(t, "wait-f4.err"), read(t, "wait-f4.err"))

    # Ctrl-C stops waiting, not the backup.
    p = spawn_wait(t, sim, "f5")
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    t.eq(p.wait(20), 1, "exit code after SIGINT")
    t.check("stopped waiting; backup f5 goes on" in read(t, "wait-f5.err"), read(t, "wait-f5.err"))
    t.eq(sim.get(BK + "/f5")[0], 200, "the backup is still there")


@case
def wait_draws_a_bar_on_a_terminal(t):
    import pty
    import select
    sim = setup(t)
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm", COLUMNS="100")
    p = subprocess.Popen([BIN, "backup", "create", "tb", "--wait", "--kubeconfig", sim.kubeconfig],
                         stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    t.on_cleanup(lambda: (p.poll() is None and p.kill(), p.wait()))
    chunks = []

    def pump(until):
        end = time.monotonic() + until
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                chunks.append(data)

    wait_for(lambda: sim.get(BK + "/tb")[0] == 200, 10, "backup created")
    set_status(sim, "tb", {"phase": "InProgress", "claim": {"holder": "srv-z", "attempt": 3},
                           "progress": {"totalItems": 40, "itemsBackedUp": 10, "bytesDone": 1 << 20}})
    pump(1.5)
    set_status(sim, "tb", {"progress": {"itemsBackedUp": 30, "bytesDone": 3 << 20}})
    pump(1.5)
    set_status(sim, "tb", {"phase": "Completed", "progress": {"itemsBackedUp": 40}})
    pump(3)
    t.eq(p.wait(10), 0, "exit code")
    pump(0.5)
    os.close(master)
    out = b"".join(chunks).decode("utf-8", "replace")
    t.check("\r\x1b[K" in out, "the bar is redrawn in place: %r" % out[-400:])
    t.check("[######" in out and " 25%" in out and "10/40 items" in out, "bar at 25%%: %r" % out[-600:])
    t.check("30/40 items" in out and " 75%" in out, "bar at 75%%: %r" % out[-600:])
    t.check("holder srv-z, attempt 3" in out, "holder and attempt on the bar: %r" % out[-400:])
    t.check("Completed [########################] 100%" in out, "final bar: %r" % out[-400:])
    for line in out.replace("\r\x1b[K", "\n").splitlines():
        if line.startswith("backup tb "):
            t.check(len(line) < 100, "bar fits the terminal width: %r" % line)


def lay_out_backup(root, prefix, name, log_text, n_items=3):
    """Velero's layout for backup name under root/prefix, as the engine writes it."""
    d = os.path.join(root, prefix, "backups", name) if prefix else os.path.join(root, "backups", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "velero-backup.json"), "w") as f:
        json.dump({"apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": {"name": name}}, f)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for i, (path, data) in enumerate([("metadata/version", b"1.1.0\n")] + [
                ("resources/configmaps/namespaces/shop/cm%d.json" % i,
                 json.dumps({"kind": "ConfigMap", "data": {"x": "y" * 5000 * i}}).encode())
                for i in range(n_items)]):
            ti = tarfile.TarInfo(path)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    tarball = buf.getvalue()
    with open(os.path.join(d, name + ".tar.gz"), "wb") as f:
        f.write(tarball)
    # Logs as two gzip members, as a server that appends per part would.
    half = len(log_text) // 2
    with open(os.path.join(d, name + "-logs.gz"), "wb") as f:
        f.write(gzip.compress(log_text[:half].encode()) + gzip.compress(log_text[half:].encode()))
    with open(os.path.join(d, name + "-resource-list.json.gz"), "wb") as f:
        f.write(gzip.compress(json.dumps({"v1/ConfigMap": ["shop/cm0"]}).encode()))
    return d, tarball


@case
def logs_download_and_delete_on_fs_storage(t):
    sim = setup(t)
    root = t.mkdir("store")
    add_fs_location(sim, "default", root, prefix="pfx", default=True)
    log_text = "".join("2026-01-01T00:00:%02dZ INFO backup_run: item %d\n" % (i % 60, i)
                       for i in range(200))
    d1, tarball = lay_out_backup(root, "pfx", "b1", log_text, n_items=40)
    d2, _ = lay_out_backup(root, "pfx", "b2", "other\n")
    for n in ("b1", "b2", "b3"):
        t.eq(cli(sim, "backup", "create", n).returncode, 0, "create " + n)
        set_status(sim, n, {"phase": "Completed"})

    r = cli(sim, "backup", "logs", "b1")
    t.eq(r.returncode, 0, "logs exit code: %r" % r.stderr)
    t.eq(r.stdout, log_text, "logs are the gunzipped text of every member")
    r = cli(sim, "backup", "logs", "b3")
    t.eq(r.returncode, 1, "logs of a backup with nothing stored")
    t.check("no logs for backup b3" in r.stderr and "pfx/backups/b3/b3-logs.gz" in r.stderr, r.stderr)

    r = cli(sim, "backup", "download", "b1", cwd=t.dir)
    t.eq(r.returncode, 0, "download exit code: %r" % r.stderr)
    with open(t.path("b1.tar.gz"), "rb") as f:
        t.check(f.read() == tarball, "default file NAME.tar.gz holds the tarball")
    t.check("b1.tar.gz" in r.stdout, r.stdout)
    t.check("downloaded" in r.stderr, "final progress line: %r" % r.stderr)
    r = cli(sim, "backup", "download", "b1", "--output-file", t.path("x.tgz"))
    t.eq(r.returncode, 0, "download --output-file")
    with tarfile.open(t.path("x.tgz")) as tf:
        t.eq(tf.extractfile("metadata/version").read(), b"1.1.0\n", "downloaded tarball reads")
    r = cli(sim, "backup", "download", "b1", "-o", t.path("y.tgz"))
    t.eq(r.returncode, 0, "download -o FILE as in Velero")
    t.check(os.path.getsize(t.path("y.tgz")) == len(tarball), "-o FILE written")
    t.eq([f for f in os.listdir(t.dir) if ".part-" in f], [], "no temp files left")
    piped = subprocess.run([BIN, "backup", "download", "b1", "-o", "-", "--kubeconfig", sim.kubeconfig],
                           capture_output=True, timeout=60)
    t.eq(piped.returncode, 0, "download to stdout")
    t.check(piped.stdout == tarball, "-o - streams the tarball to stdout")
    r = cli(sim, "backup", "download", "b3", cwd=t.dir)
    t.eq(r.returncode, 1, "download of a backup without a tarball")
    t.check(not os.path.exists(t.path("b3.tar.gz")), "no file for a failed download")

    r = cli(sim, "backup", "delete", "b1")
    t.eq(r.returncode, 2, "delete without --confirm and without a terminal")
    t.check(os.path.isdir(d1) and get_backup(sim, "b1"), "nothing deleted without --confirm")
    r = cli(sim, "backup", "delete", "b1", "--confirm")
    t.eq(r.returncode, 0, "delete exit code: %r" % r.stderr)
    t.check("4 objects" in r.stdout, r.stdout)
    t.check(not os.path.exists(d1), "every key under backups/b1/ is gone")
    t.eq(sim.get(BK + "/b1")[0], 404, "the Backup object is gone (finalizer released, no server runs)")
    t.check(os.path.exists(os.path.join(d2, "b2.tar.gz")), "backup b2's files are untouched")
    r = cli(sim, "backup", "delete", "b1", "--confirm")
    t.eq(r.returncode, 1, "deleting a missing backup")


@case
def delete_refuses_a_readonly_location(t):
    """A ReadOnly location is never written to: `backup delete` refuses
    and deletes nothing, neither files nor the object (issue 24: it used to
    say "Backup kept deleted (7 objects removed)")."""
    sim = setup(t)
    root = t.mkdir("store")
    add_fs_location(sim, "default", root, default=True, access="ReadOnly")
    d, _ = lay_out_backup(root, "", "kept", "one line\n")
    before = sorted(os.listdir(d))
    t.eq(cli(sim, "backup", "create", "kept").returncode, 0, "create")
    set_status(sim, "kept", {"phase": "Completed"})
    r = cli(sim, "backup", "delete", "kept", "--confirm")
    t.eq(r.returncode, 1, "delete from a ReadOnly location: %r %r" % (r.stdout, r.stderr))
    t.check("ReadOnly" in r.stderr and "default" in r.stderr and "nothing deleted" in r.stderr,
            "the refusal names the location and its access mode: %r" % r.stderr)
    t.check("deleted (" not in r.stdout, "no success line: %r" % r.stdout)
    t.eq(sorted(os.listdir(d)), before, "files in the ReadOnly location")
    b = get_backup(sim, "kept")
    t.check("deletionTimestamp" not in b["metadata"], "the Backup object is not deleted")


@case
def storage_location_problems_are_clear(t):
    sim = setup(t)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "s3loc"},
                         "spec": {"provider": "s3", "objectStorage": {"bucket": "bkt"},
                                  "config": {"endpoint": "http://127.0.0.1:1", "region": "us-east-1"},
                                  "credential": {"name": "cloud-creds", "key": "cloud"}}})
    t.eq(cli(sim, "backup", "create", "b1", "--storage-location", "s3loc").returncode, 0, "create")
    r = cli(sim, "backup", "logs", "b1")
    t.eq(r.returncode, 1, "missing credentials Secret")
    t.check("cloud-creds" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr)
    t.eq(cli(sim, "backup", "create", "b2").returncode, 0, "create without location")
    r = cli(sim, "backup", "download", "b2")
    t.eq(r.returncode, 1, "no default location")
    t.check("no BackupStorageLocation in cairn-system is marked default" in r.stderr, r.stderr)
    # A backup that never started can be deleted without its storage.
    r = cli(sim, "backup", "delete", "b2", "--confirm")
    t.eq(r.returncode, 0, "delete of a never-started backup: %r" % r.stderr)
    t.eq(sim.get(BK + "/b2")[0], 404, "object deleted")


@case
def logs_download_delete_on_s3_with_secret_credentials(t):
    try:
        from s3rver import S3rver
    except ImportError:
        t.skip("tests/lib/s3rver.py missing")
    import base64
    s3 = S3rver(t)
    sim = setup(t)
    with open(s3.creds_file, "rb") as f:
        good = base64.b64encode(f.read()).decode()
    bad = base64.b64encode(b"[default]\naws_access_key_id = WRONG\naws_secret_access_key = x\n").decode()
    for name, data in (("good-creds", good), ("bad-creds", bad)):
        sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"cloud": data}})
    for name, secret in (("s3", "good-creds"), ("s3-bad", "bad-creds")):
        sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                             "metadata": {"name": name},
                             "spec": {"provider": "aws", "objectStorage": {"bucket": "cairn", "prefix": "pfx"},
                                      "credential": {"name": secret, "key": "cloud"},
                                      "config": {"s3Url": s3.endpoint, "region": "us-east-1",
                                                 "s3ForcePathStyle": "true"}}})
    log_text = "line one\nline two\n" * 50
    d, tarball = lay_out_backup(t.mkdir("layout"), "", "b1", log_text, n_items=20)
    s3.aws("s3", "cp", "--recursive", d, "s3://cairn/pfx/backups/b1/")
    for name, loc in (("b1", "s3"), ("bad", "s3-bad")):
        t.eq(cli(sim, "backup", "create", name, "--storage-location", loc).returncode, 0, "create " + name)
        set_status(sim, name, {"phase": "Completed", "startTimestamp": "2026-01-01T00:00:00Z"})
    env = {k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SHARED_CREDENTIALS_FILE")}
    r = cli(sim, "backup", "logs", "b1", env=env)
    t.eq((r.returncode, r.stdout), (0, log_text), "logs from S3 (stderr %r)" % r.stderr)
    r = cli(sim, "backup", "download", "b1", "--output-file", t.path("b1.tgz"), env=env)
    t.eq(r.returncode, 0, "download from S3: %r" % r.stderr)
    with open(t.path("b1.tgz"), "rb") as f:
        t.check(f.read() == tarball, "downloaded bytes equal the stored tarball")
    r = cli(sim, "backup", "logs", "bad", env=env)
    t.eq(r.returncode, 1, "refused credentials")
    t.eq(len(r.stderr.strip().splitlines()), 1, "one error line: %r" % r.stderr)
    r = cli(sim, "backup", "delete", "b1", "--confirm", env=env)
    t.eq(r.returncode, 0, "delete on S3: %r" % r.stderr)
    left = s3.aws("s3", "ls", "--recursive", "s3://cairn/pfx/backups/b1/", check=False).stdout
    t.eq(left.strip(), "", "no keys left under backups/b1/")
    t.eq(sim.get(BK + "/b1")[0], 404, "Backup object gone")


main()

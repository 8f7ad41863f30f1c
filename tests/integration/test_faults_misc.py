"""Smaller fault holes (issue 19): connection refused answered at once,
a backup whose every list failed is Failed, and a storage location that
keeps failing backups turns Unavailable (and Available again)."""
import errno
import os
import shutil
import subprocess
import time

from cairntest import BIN, case, main, wait_for, cairn, CheckFailed

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def setup(t, path):
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": path}, "default": True}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "app"}})
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 2000}}, 200,
             name="cm-{i:04d}", namespace="app")
    return sim


def backup(sim, name, resources=None):
    spec = {"includedNamespaces": ["app"]}
    if resources:
        spec["includedResources"] = resources
    sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                        "metadata": {"name": name, "namespace": NS}, "spec": spec})
    return wait_for(lambda: (lambda x: x if x.get("status", {}).get("phase") in FINAL else None)(
        sim.ok("GET", "%s/%s" % (BK, name))), 90, "backup %s to finish" % name, interval=0.2)


@case
def connection_refused_is_reported_at_once(t):
    kc = t.path("kubeconfig")
    with open(kc, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n"
                "  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\n"
                "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                "users:\n- name: u\n  user: {token: x}\n")
    t0 = time.monotonic()
    r = cairn("backup", "get", "--kubeconfig", kc)
    took = time.monotonic() - t0
    t.check(r.returncode != 0, "exit code 0 against a closed port")
    t.check("connect" in r.stderr.lower(), "message: %s" % r.stderr[-300:])
    t.check(took < 5, "connection refused took %.1f s to report" % took)


@case
def every_list_failed_is_failed(t):
    sim = setup(t, t.mkdir("store"))
    srv = t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                   "--server-id", "s1", "--journal", t.path("j.db"), "--retry-period", "200ms"],
                  name="server")
    # every list of the backup's resources is forbidden
    sim.faults({"method": "GET", "query": "limit=", "status": 403,
                "path": r"/(configmaps|secrets|serviceaccounts)$"})
    b = backup(sim, "nothing", ["configmaps", "secrets", "serviceaccounts"])
    t.eq(b["status"]["phase"], "Failed", "phase")
    t.check("every resource list failed" in b["status"].get("failureReason", ""),
            "reason: %s" % b["status"].get("failureReason"))
    sim.clear_faults()
    b = backup(sim, "something", ["configmaps", "secrets", "serviceaccounts"])
    t.eq(b["status"]["phase"], "Completed", "phase once lists work")
    t.check(srv.alive(), "server died")


def can_mount(t):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    d = t.mkdir("probe-mnt")
    return subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs '%s'" % d],
                          capture_output=True).returncode == 0


def fill(path):
    with open(path, "wb", buffering=0) as f:
        for size in (65536, 512):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise


@case
def location_unavailable_after_repeated_storage_failures(t):
    if not can_mount(t):
        t.skip("cannot mount a tmpfs here (needs root and mount namespaces)")
    store = t.mkdir("store")
    sim = setup(t, store)
    cmd = ("mount -t tmpfs -o size=8m tmpfs '%s' && exec '%s' server --kubeconfig '%s' "
           "--namespace %s --server-id s1 --journal '%s' --retry-period 200ms" %
           (store, BIN, sim.kubeconfig, NS, t.path("j.db")))
    srv = t.spawn(["unshare", "-m", "sh", "-c", cmd], name="server")
    inside = "/proc/%d/root%s" % (srv.pid, store)

    def mounted():
        try:
            return os.stat(inside).st_dev != os.stat(store).st_dev
        except OSError:
            return False
    wait_for(mounted, 20, "the server's tmpfs")
    filler = "/proc/%d/root%s/filler" % (srv.pid, store)
    fill(filler)
    phases = []
    for i in range(3):
        b = backup(sim, "full-%d" % i)
        phases.append(b["status"]["phase"])
    t.eq(phases, ["Failed"] * 3, "backups to a full disk")
    loc = wait_for(lambda: (lambda x: x if x.get("status", {}).get("phase") == "Unavailable" else None)(
        sim.ok("GET", "%s/default" % BSL)), 20, "the location to turn Unavailable")
    t.check("in a row failed" in loc["status"].get("message", ""), "message: %s" % loc["status"])
    os.unlink(filler)
    b = backup(sim, "room-again")
    t.eq(b["status"]["phase"], "Completed", "backup once there is room (%s)" %
         b["status"].get("failureReason"))
    wait_for(lambda: sim.ok("GET", "%s/default" % BSL).get("status", {}).get("phase") == "Available",
             20, "the location to turn Available again")


main()

"""bench_restore: restore of N Secrets (default 31,000: the shape of Velero
issue #6845, 52 minutes there) by cairn's restore controller, against
`kubectl create -f` of the very same objects, both into a fresh kubesim, in
the same run. Prints figures and the ratio; never passes or fails.

    CAIRN_BENCH_SECRETS=31000 CAIRN_BENCH_RESTORE_WORKERS=8 make bench BENCH_FILTER=restore
"""
import json
import os
import subprocess
import sys
import time

from cairntest import Case, wait_for, BUILDDIR, SRCDIR

sys.path.insert(0, os.path.join(SRCDIR, "tests", "helpers"))
import restore_tarball as rt  # noqa: E402

N = int(os.environ.get("CAIRN_BENCH_SECRETS", "31000"))
WORKERS = int(os.environ.get("CAIRN_BENCH_RESTORE_WORKERS", "8"))
RUNNER = os.path.join(BUILDDIR, "tests", "helpers", "restore_runner")


def main():
    t = Case("bench_restore")
    try:
        run(t)
    finally:
        t.finish()


def run(t):
    src = t.kubesim(name="source", tls=False)
    src.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "bench"}})
    src.bulk({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"labels": {"app": "bench"}},
              "data": {"token": "c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTA=", "ca.crt": "Y2VydA=="}},
             N, name="secret-{i:05d}", namespace="bench")
    items = rt.dump(src, [("", "v1", "namespaces", False), ("", "v1", "secrets", True)])
    secrets = [o for g, v, p, o in items if p == "secrets"]
    print("objects: %d Secrets in namespace bench" % len(secrets), flush=True)

    # cairn: Velero-layout tarball, restore controller, fresh kubesim
    a = t.kubesim(name="cairn-target", tls=False)
    a.install_crds("cairn-system")
    store = t.mkdir("store")
    tb = rt.tar_bytes(rt.entries_for(items))
    rt.install_backup(a, store, "b", tb)
    t.spawn([RUNNER, "--kubeconfig", a.kubeconfig, "--namespace", "cairn-system",
             "--journal", t.path("journal.db"), "--server-id", "bench",
             "--restore-workers", WORKERS, "--period-ms", 50], name="runner")
    start = time.monotonic()
    rt.create_restore(a, "r", {"backupName": "b"})

    def done():
        r = rt.get_restore(a, "r")
        return r if r.get("status", {}).get("phase") in rt.FINAL else None
    r = wait_for(done, 3600, "restore", interval=0.2)
    cairn_s = time.monotonic() - start
    n_ok = len(a.ok("GET", "/api/v1/namespaces/bench/secrets")["items"])
    print("cairn restore: %.1f s, phase %s, %d Secrets present, %.0f objects/s "
          "(tarball %.1f MiB, %d restore workers)" % (
              cairn_s, r["status"]["phase"], n_ok, len(secrets) / cairn_s, len(tb) / 2**20,
              WORKERS), flush=True)

    # kubectl create -f of the same objects (metadata reset as a restore does)
    b = t.kubesim(name="kubectl-target", tls=False)
    b.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": "bench"}})
    path = t.path("secrets.json")
    with open(path, "w") as f:
        for o in secrets:
            f.write(json.dumps(rt.normalize(o)) + "\n")
    start = time.monotonic()
    p = subprocess.run(["kubectl", "--kubeconfig", b.kubeconfig, "--cache-dir",
                        t.path("kcache"), "create", "-f", path, "--validate=false", "-o", "name"],
                       capture_output=True, text=True)
    kubectl_s = time.monotonic() - start
    n_ok_b = len(b.ok("GET", "/api/v1/namespaces/bench/secrets")["items"])
    print("kubectl create -f: %.1f s, exit %d, %d Secrets present, %.0f objects/s" % (
        kubectl_s, p.returncode, n_ok_b, len(secrets) / kubectl_s), flush=True)
    print("ratio: cairn is %.1fx faster than kubectl create -f (goal: >= 3x); "
          "Velero #6845: 52 min for 31k Secrets" % (kubectl_s / cairn_s), flush=True)


main()

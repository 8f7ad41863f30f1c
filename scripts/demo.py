#!/usr/bin/env python3
"""scripts/demo.py: cairn's main job end to end, on the embedded defaults.

Called by scripts/demo.sh after the build. It starts the Kubernetes API
stand-in (tests/kubesim, TLS and a token, as a real cluster would ask) seeded
with examples/shop plus a few thousand ConfigMaps so there is something to
watch, installs cairn's CRDs, creates a local-directory BackupStorageLocation
(the embedded default for a single edge box), starts `cairn server`, runs
`cairn backup create --wait` with its live progress (the objects, and the
shop database's hostPath volume through the built-in mover), then shows the
backup and what the tarball holds. Everything lives in one temp directory.
"""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CAIRN = os.environ.get("CAIRN_BIN") or os.path.join(ROOT, "cairn")
EXTRA_CONFIGMAPS = int(os.environ.get("CAIRN_DEMO_OBJECTS", "20000"))


def step(msg):
    print("\n\033[1m==> %s\033[0m" % msg if sys.stdout.isatty() else "\n==> %s" % msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, proc, what, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            sys.exit("demo: %s exited early (see its log)" % what)
        time.sleep(0.05)
    sys.exit("demo: %s did not start in %ds" % (what, timeout))


def main():
    tmp = tempfile.mkdtemp(prefix="cairn-demo.")
    procs = []

    def cleanup(*_):
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        if os.environ.get("CAIRN_DEMO_KEEP") == "1":
            print("\n(kept %s)" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    try:
        run(tmp, procs)
    finally:
        cleanup()


def run(tmp, procs):
    kubeconfig = os.path.join(tmp, "kubeconfig")
    ready = os.path.join(tmp, "kubesim.ready")
    storage = os.path.join(tmp, "storage")
    os.makedirs(storage)
    env = dict(os.environ, KUBECONFIG=kubeconfig)

    step("Starting a Kubernetes API stand-in seeded with a sample shop application")
    seed = os.path.join(tmp, "seed")
    os.makedirs(seed)
    shutil.copy(os.path.join(ROOT, "examples/shop/shop.json"), seed)
    sim_log = open(os.path.join(tmp, "kubesim.log"), "wb")
    procs.append(subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests/kubesim/kubesim.py"), "--port", "0",
         "--ready-file", ready, "--kubeconfig-out", kubeconfig, "--tls",
         "--token", "admin=demo-admin-token", "--seed", seed],
        stdout=sim_log, stderr=subprocess.STDOUT))
    wait_file(ready, procs[-1], "kubesim")
    url = open(ready).read().strip()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    body = json.dumps({"template": {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"namespace": "shop", "labels": {"app": "catalog"}},
                                    "data": {"sku": "demo", "price": "9.99", "description": "x" * 200}},
                       "namespace": "shop", "name": "catalog-item-{i:05d}",
                       "count": EXTRA_CONFIGMAPS}).encode()
    req = urllib.request.Request(url + "/_sim/bulk", data=body, method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer demo-admin-token"})
    urllib.request.urlopen(req, context=ctx).read()
    kubectl = ["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", os.path.join(tmp, "kcache")]
    subprocess.run(kubectl + ["get", "deployments,statefulsets,services,pvc", "-n", "shop"], check=True)
    print("... and %d ConfigMaps of a product catalog in namespace shop" % EXTRA_CONFIGMAPS)

    step("Installing cairn's CRDs and a local-directory storage location")
    subprocess.run(kubectl + ["apply", "-f", os.path.join(ROOT, "schema/crds/")], check=True)
    bsl = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cairn-system"}},
        {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
         "metadata": {"name": "default", "namespace": "cairn-system"},
         "spec": {"provider": "fs", "default": True, "objectStorage": {"bucket": "local"},
                  "config": {"path": storage}}}]}
    # kubectl validates a `kind: List` through /openapi/v2; send a document stream.
    subprocess.run(kubectl + ["apply", "-f", "-"], check=True, text=True,
                   input="\n".join(json.dumps(o) for o in bsl["items"]))

    # The shop's database volume is a hostPath PV (as k3s's local-path
    # provisioner makes them). The node's root is "mounted" at volume_root:
    # its directory holds a few MB of data for the built-in mover to back up.
    volume_root = os.path.join(tmp, "node-root")
    pv_dir = os.path.join(volume_root, "var/lib/cairn-demo/pv-postgres-0")
    os.makedirs(os.path.join(pv_dir, "base"))
    with open(os.path.join(pv_dir, "PG_VERSION"), "w") as f:
        f.write("16\n")
    for i in range(8):
        with open(os.path.join(pv_dir, "base", "1636%d" % i), "wb") as f:
            f.write((b"row %06d of the orders table\n" % i) * 20000 + os.urandom(65536))

    step("Starting cairn server (web endpoint on 127.0.0.1)")
    port = free_port()
    server_log = os.path.join(tmp, "server.log")
    procs.append(subprocess.Popen(
        [CAIRN, "server", "--kubeconfig", kubeconfig, "--namespace", "cairn-system",
         "--server-id", "demo-1", "--journal", os.path.join(tmp, "journal.db"),
         "--listen", "127.0.0.1:%d" % port, "--part-size", "262144",
         "--volume-root", volume_root],
        stdout=open(server_log, "wb"), stderr=subprocess.STDOUT, env=env))
    time.sleep(0.5)
    if procs[-1].poll() is not None:
        print(open(server_log).read())
        sys.exit("demo: cairn server exited")
    print("cairn server running; status page: http://127.0.0.1:%d/status" % port)

    step("cairn backup create shop-backup --include-namespaces shop --wait")
    r = subprocess.run([CAIRN, "backup", "create", "shop-backup", "--include-namespaces", "shop",
                        "--namespace", "cairn-system", "--kubeconfig", kubeconfig, "--wait"], env=env)
    if r.returncode != 0:
        print("---- server log (last lines) ----")
        print("".join(open(server_log).readlines()[-30:]))
        sys.exit("demo: the backup did not complete (exit %d)" % r.returncode)

    step("cairn backup describe shop-backup")
    subprocess.run([CAIRN, "backup", "describe", "shop-backup", "--namespace", "cairn-system",
                    "--kubeconfig", kubeconfig], env=env)

    step("What is in storage (Velero's layout)")
    for dirpath, _, files in sorted(os.walk(storage)):
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            print("  %-70s %10d bytes" % (os.path.relpath(p, storage), os.path.getsize(p)))
    tarball = None
    for dirpath, _, files in os.walk(storage):
        for f in files:
            if f == "shop-backup.tar.gz":
                tarball = os.path.join(dirpath, f)
    if tarball is None:
        sys.exit("demo: no tarball found in storage")
    with tarfile.open(tarball, "r:gz") as tf:
        names = tf.getnames()
    kinds = {}
    for n in names:
        parts = n.split("/")
        if n.startswith("resources/") and "-preferredversion" in n:
            kinds[parts[1]] = kinds.get(parts[1], 0) + 1
    print("\n%s: %d tar entries; items by resource (preferred-version paths):" % (
        os.path.basename(tarball), len(names)))
    for k in sorted(kinds):
        print("  %-40s %6d" % (k, kinds[k]))
    print("\nFirst entries:")
    for n in names[:8]:
        print("  " + n)
    print("\nDone: a Velero-format backup, made by cairn, read back with Python's tarfile.")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""tests/chaos/chaos.py: the chaos suite (issue 19).

Random kill -9 of `cairn server` during backups and restores, SIGSTOP past
the Lease, API faults through kubesim's fault rules, S3 faults through the
S3 fault proxy (tests/lib/faultproxy.py), a full journal disk and a store
turned read-only, each followed by an independent check of what landed:

- backups: the tarball is read by GNU tar and by Python's tarfile (same
  entries), every ConfigMap of the data set is in it exactly once at its
  legacy path and once at its preferred-version path, equal to the API's
  object (uid, resourceVersion, data), `velero-backup.json` says Completed;
- restores: every ConfigMap is in the target namespace with the backed-up
  data, and kubesim's request log shows exactly one successful create
  (201) per object: nothing restored twice.

The seed (--seed, printed at the start and in each failure) shuffles the
plan and seeds each trial's own generator (from the seed and the trial's
number), so a run is reproduced with the same seed, a single trial with
--seed S --only N, whatever ran beside it (timings on a loaded machine
still vary). --jobs N runs N trials side by side, each job with worlds of
its own (kubesim, fs store, s3rver behind a fault proxy), so one trial's
fault rules and kills never touch another's. Kinds:

  kill         kill -9 during a backup; restart with the same journal or a
               takeover by another server (coin flip)
  kill-restore the same during a restore
  stop         SIGSTOP of the owner past the Lease; another server takes
               over; SIGCONT: the old owner must stand down
  api-500 api-429 api-409 api-drop api-slow
               kubesim fault rules on a fraction of the API requests
  s3-503 s3-500 s3-reset
               S3 faults on a fraction of the storage requests
  disk-full    the journal's filesystem fills up for a while (a tmpfs in a
               private mount namespace); the backup waits and completes
  read-only    the fs store is read-only for a while: its writes wait
               (config.readOnlyWait) and the backup completes, as the next

Usage: chaos.py [--seed N] [--kill N] [--faults N] [--kinds k1,k2] [--objects N]
                [--jobs N] [--only i,j]
`make chaos` runs 200 kill trials and 20 of each other kind; the normal
suite runs a short version (tests/integration/test_chaos_short.py).
Prints one line per trial and a closing note with the seed and counts;
exits 1 if any trial lost, duplicated or failed something.
"""
import argparse
import base64
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

from cairntest import BIN, Case, CheckFailed, wait_for  # noqa: E402

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
RS = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")
TIMINGS = ["--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "300ms"]
API_KINDS = {
    "api-500": {"status": 500},
    "api-429": {"status": 429, "retryAfter": 0},
    "api-409": {"status": 409, "method": "PUT"},
    "api-drop": {"drop": True},
    "api-slow": {"delay": 0.3},
}
S3_KINDS = {"s3-503": "slowdown", "s3-500": "500", "s3-reset": "reset"}
ALL_KINDS = ["kill", "kill-restore", "stop"] + list(API_KINDS) + list(S3_KINDS) + \
    ["disk-full", "read-only"]


class Trouble(Exception):
    """A trial found something wrong (lost, duplicated, not Completed)."""


class World:
    """kubesim with a data set, a store (fs or S3 behind the fault proxy)."""

    def __init__(self, t, rng, objects, s3=False):
        self.t = t
        self.rng = rng
        # cairn has a token of its own: fault rules hit its requests only
        self.sim = t.kubesim(tokens={"admin": "admin-token", "cairn": "cairn-token"})
        self.sim.install_crds(NS)
        self.kubeconfig = self.sim.kubeconfig_for("cairn")
        self.s3 = self.proxy = None
        self.root = None
        if s3:
            from s3rver import S3rver
            from faultproxy import FaultProxy
            self.s3 = S3rver(t)
            self.proxy = FaultProxy(t, self.s3.port, rate=0.0, seed=rng.randrange(1 << 30))
            with open(self.s3.creds_file, "rb") as f:
                self.sim.ok("POST", "/api/v1/namespaces/%s/secrets" % NS, {
                    "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds"},
                    "data": {"cloud": base64.b64encode(f.read()).decode()}})
            spec = {"provider": "s3", "objectStorage": {"bucket": "cairn", "prefix": "pfx"},
                    "credential": {"name": "s3-creds", "key": "cloud"},
                    "config": {"endpoint": self.proxy.endpoint, "region": "us-east-1",
                               "s3ForcePathStyle": "true"}, "default": True}
        else:
            self.root = t.mkdir("store")
            spec = {"provider": "fs", "objectStorage": {"bucket": "bk"},
                    "config": {"path": self.root}, "default": True}
        self.sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                                  "metadata": {"name": "default", "namespace": NS}, "spec": spec})
        self.sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": "bulk"}})
        for c in range(0, objects, 250):
            self.sim.ok("POST", "/_sim/bulk", {"items": [
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "cm-%05d" % i, "namespace": "bulk"},
                 "data": {"payload": os.urandom(rng.randrange(64, 512)).hex()}}
                for i in range(c, min(objects, c + 250))]})
        self.objects = {o["metadata"]["name"]: o for o in
                        self.sim.ok("GET", "/api/v1/namespaces/bulk/configmaps")["items"]}
        self.nserver = 0
        self.procs = []
        self.base = None        # the kill-restore trials' backup, made once
        self.nparts = 0         # parts of a whole backup (the first one checked)
        # kills land within this many seconds of the Backup's creation:
        # lowered to 0.9x the earliest time a kill trial found its backup
        # Completed already (a faster walk must not turn kills into no-ops)
        self.kill_max = 3.0
        self.checked = 0.0      # seconds spent in the independent checks
        self.base_faults()

    def base_faults(self):
        """Slow list pages of the data set (0.3 s each, cairn only), so a
        kill or a fault lands mid-backup; per-trial rules come on top."""
        self.sim.clear_faults()
        self.sim.faults({"method": "GET", "path": "/configmaps$",
                         "query": "limit=", "delay": 0.3, "token": "cairn"})

    # ---- processes ----
    def server(self, sid, journal, env=None, wrap=None, part_size=65536):
        argv = [BIN, "server", "--kubeconfig", self.kubeconfig, "--namespace", NS,
                "--server-id", sid, "--journal", journal, "--part-size", str(part_size),
                "--log-level", "info", "--workers", "2"] + TIMINGS
        if wrap is not None:
            argv = wrap(argv)
        self.nserver += 1
        p = self.t.spawn(argv, name="server-%s-%d" % (sid, self.nserver), env=env)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.alive():
                p.signal(signal.SIGCONT)
                p.stop(timeout=5)
        self.procs = []

    # ---- objects ----
    def get(self, path):
        return self.sim.ok("GET", path)

    def wait_final(self, path, timeout, procs=()):
        def done():
            o = self.get(path)
            return o if o.get("status", {}).get("phase") in FINAL else None
        try:
            return wait_for(done, timeout, path, interval=0.2)
        except CheckFailed:
            o = self.get(path)
            logs = " | ".join(p.output()[-800:] for p in procs)
            raise Trouble("not final after %ds: phase %s; %s" % (
                timeout, o.get("status", {}).get("phase"), logs[-2400:]))

    # ---- storage ----
    def fetch(self, name, fname, dst):
        if self.root is not None:
            src = os.path.join(self.root, "backups", name, fname)
            if not os.path.exists(src):
                raise Trouble("%s missing" % fname)
            shutil.copy(src, dst)
            return
        self.proxy.rate = 0.0
        r = subprocess.run(["aws", "--endpoint-url", self.s3.endpoint, "s3", "cp",
                            "s3://cairn/pfx/backups/%s/%s" % (name, fname), dst],
                           capture_output=True, text=True, env=self.s3.full_env())
        if r.returncode != 0:
            raise Trouble("%s missing: %s" % (fname, r.stderr[-300:]))

    # ---- the independent checks ----
    def check_backup(self, name):
        t0 = time.monotonic()
        try:
            self._check_backup(name)
        finally:
            self.checked += time.monotonic() - t0

    def _check_backup(self, name):
        b = self.get("%s/%s" % (BK, name))
        phase = b.get("status", {}).get("phase")
        if phase != "Completed":
            raise Trouble("backup %s %s: %s" % (name, phase, b["status"].get("failureReason")))
        if not self.nparts:
            self.nparts = len(b["status"].get("checkpoint", {}).get("parts", []))
        tmp = self.t.mkdir("check-" + name)
        tgz = os.path.join(tmp, "b.tar.gz")
        self.fetch(name, name + ".tar.gz", tgz)
        self.fetch(name, "velero-backup.json", os.path.join(tmp, "v.json"))
        with open(os.path.join(tmp, "v.json")) as f:
            if json.load(f)["status"]["phase"] != "Completed":
                raise Trouble("velero-backup.json of %s is not Completed" % name)
        r = subprocess.run(["tar", "tzf", tgz], capture_output=True, text=True)
        if r.returncode != 0:
            raise Trouble("GNU tar cannot read %s: %s" % (name, r.stderr[-300:]))
        gnu = r.stdout.split("\n")[:-1]
        legacy = "resources/configmaps/namespaces/bulk/"
        items = {}
        with tarfile.open(tgz, "r:gz") as tf:
            names = []
            for m in tf:        # one pass: getmember() per name is quadratic
                names.append(m.name)
                if m.name.startswith(legacy) and m.name.endswith(".json"):
                    items.setdefault(m.name[len(legacy):-5], tf.extractfile(m).read())
            if names != gnu:
                raise Trouble("GNU tar and tarfile disagree on %s" % name)
            dup = len(names) - len(set(names))
            if dup:
                raise Trouble("%d entries twice in %s" % (dup, name))
            for prefix in (legacy, "resources/configmaps/v1-preferredversion/namespaces/bulk/"):
                got = {n[len(prefix):-5] for n in names if n.startswith(prefix)}
                lost = set(self.objects) - got
                extra = got - set(self.objects)
                if lost or extra:
                    raise Trouble("%s: %d lost (%s), %d unexpected under %s" % (
                        name, len(lost), sorted(lost)[:3], len(extra), prefix))
            for n, o in self.objects.items():
                item = json.loads(items[n])
                md = item.get("metadata", {})
                if (md.get("uid"), md.get("resourceVersion"), item.get("data")) != (
                        o["metadata"]["uid"], o["metadata"]["resourceVersion"], o["data"]):
                    raise Trouble("%s: %s differs from the API" % (name, n))

    def check_restore(self, name, target, since):
        t0 = time.monotonic()
        try:
            self._check_restore(name, target, since)
        finally:
            self.checked += time.monotonic() - t0

    def _check_restore(self, name, target, since):
        r = self.get("%s/%s" % (RS, name))
        phase = r.get("status", {}).get("phase")
        if phase != "Completed":
            raise Trouble("restore %s %s: %s" % (name, phase, r["status"].get("failureReason")))
        items = {o["metadata"]["name"]: o for o in
                 self.get("/api/v1/namespaces/%s/configmaps" % target)["items"]}
        lost = [n for n in self.objects if n not in items]
        if lost:
            raise Trouble("restore %s: %d objects lost (%s)" % (name, len(lost), lost[:3]))
        for n, o in self.objects.items():
            if items[n].get("data") != o["data"]:
                raise Trouble("restore %s: %s data differs" % (name, n))
        path = "/api/v1/namespaces/%s/configmaps" % target
        creates = [e for e in self.sim.requests() if e.get("time", 0) >= since and
                   e["method"] == "POST" and e["path"] == path and e.get("status") == 201]
        if len(creates) != len(self.objects):
            raise Trouble("restore %s: %d successful creates for %d objects" % (
                name, len(creates), len(self.objects)))


def restart_or_takeover(w, rng, trial, killed_sid, journal):
    """After the owner died: the same id on its journal, or another server."""
    if rng.random() < 0.5:
        return w.server(killed_sid, journal), "restart"
    sid = "t%d" % trial
    return w.server(sid, w.t.path("j-%s.db" % sid)), "takeover"


POINTS = ["backup.after-part@%d", "backup.before-complete", "backup.after-complete",
          "backup.after-metadata"]


def run_backup_kill(w, rng, trial, stop_instead=False):
    name = "k%d" % trial
    sid = "s%d" % trial
    journal = w.t.path("j-%s.db" % sid)
    point = None
    if not stop_instead and rng.random() < 0.3:
        # a third of the kills at a named crash point (base/fault.h)
        point = rng.choice(POINTS)
        if "%d" in point:
            # a part the backup has (after its last one the point is never hit)
            point = point % rng.randrange(1, (w.nparts or 10) + 1)
    s1 = w.server(sid, journal, env={"CAIRN_FAULT": point} if point else None)
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"includedNamespaces": ["bulk"]}})
    if point:
        try:
            wait_for(lambda: not s1.alive() or w.get("%s/%s" % (BK, name)).get(
                "status", {}).get("phase") == "Completed", 60, "the crash point")
        except CheckFailed:
            pass
        delay = 0.0
    else:
        delay = 0.2 + rng.random() * (w.kill_max - 0.2)
        time.sleep(delay)
    phase = w.get("%s/%s" % (BK, name)).get("status", {}).get("phase")
    if not point and phase == "Completed":
        w.kill_max = max(0.5, min(w.kill_max, 0.9 * delay))
    if point:
        died = not s1.alive()
        s1.kill9()
        s2, what = restart_or_takeover(w, rng, trial, sid, journal)
        how = "%s at %s (%s), %s" % ("died" if died else "passed", point, phase, what)
        procs = (s2,)
    elif stop_instead:
        s1.signal(signal.SIGSTOP)
        s2 = w.server("t%d" % trial, w.t.path("j-t%d.db" % trial))
        how = "stopped at %.1fs (%s), taken over" % (delay, phase)
        time.sleep(rng.uniform(3.0, 5.0))     # past the 2 s Lease
        s1.signal(signal.SIGCONT)
        procs = (s1, s2)
    else:
        s1.kill9()
        s2, what = restart_or_takeover(w, rng, trial, sid, journal)
        how = "killed at %.1fs (%s), %s" % (delay, phase, what)
        procs = (s2,)
    w.wait_final("%s/%s" % (BK, name), 120, procs)
    w.check_backup(name)
    b = w.get("%s/%s" % (BK, name))
    return "%s; attempt %s" % (how, b["status"].get("claim", {}).get("attempt"))


def run_restore_kill(w, rng, trial, base):
    name = "r%d" % trial
    target = "rt%d" % trial
    sid = "s%d" % trial
    journal = w.t.path("j-%s.db" % sid)
    since = time.time()
    s1 = w.server(sid, journal)
    w.sim.ok("POST", RS, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"backupName": base, "includedNamespaces": ["bulk"],
                                   "namespaceMapping": {"bulk": target}}})
    delay = rng.uniform(0.2, 4.0)
    time.sleep(delay)
    s1.kill9()
    s2, what = restart_or_takeover(w, rng, trial, sid, journal)
    w.wait_final("%s/%s" % (RS, name), 120, (s2,))
    w.check_restore(name, target, since)
    return "killed at %.1fs, %s" % (delay, what)


def run_api_fault(w, rng, trial, kind):
    name = "a%d" % trial
    rule = dict(API_KINDS[kind])
    rule.update({"probability": 0.15, "seed": rng.randrange(1 << 30), "token": "cairn"})
    # the server's Lease traffic is left alone: faults there test the Lease, not the work
    rule["path"] = r"^/(api/v1|apis/(?!coordination))"
    s1 = w.server("s%d" % trial, w.t.path("j-s%d.db" % trial))
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"includedNamespaces": ["bulk"]}})
    w.sim.faults(rule)
    try:
        w.wait_final("%s/%s" % (BK, name), 180, (s1,))
    finally:
        hits = sum(r.get("hits", 0) for r in w.sim.ok("GET", "/_sim/faults")
                   if r.get("probability"))
        w.base_faults()
    w.check_backup(name)
    return "%d faults injected" % hits


def run_s3_fault(w, rng, trial, kind):
    name = "s%d" % trial
    w.proxy.kinds = (S3_KINDS[kind],)
    before = w.proxy.faults()
    w.proxy.rate = 0.3
    s1 = w.server("s%d" % trial, w.t.path("j-s%d.db" % trial), part_size=5 << 20)
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"includedNamespaces": ["bulk"]}})
    try:
        w.wait_final("%s/%s" % (BK, name), 180, (s1,))
    finally:
        w.proxy.rate = 0.0
    w.check_backup(name)
    return "%d S3 faults injected" % (w.proxy.faults() - before)


def mount_wrap(dirpath, size):
    def wrap(argv):
        cmd = "mount -t tmpfs -o size=%s tmpfs '%s' && exec %s" % (
            size, dirpath, " ".join("'%s'" % a for a in argv))
        return ["unshare", "-m", "sh", "-c", cmd]
    return wrap


def fill(path):
    import errno
    with open(path, "wb", buffering=0) as f:
        for size in (65536, 512):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise


def inside(proc, path):
    p = "/proc/%d/root%s" % (proc.pid, path)

    def mounted():
        try:
            return os.stat(p).st_dev != os.stat(path).st_dev
        except OSError:
            return False
    wait_for(mounted, 20, "the server's tmpfs")
    return p


def run_disk_full(w, rng, trial):
    name = "d%d" % trial
    jdir = w.t.mkdir("jfs%d" % trial)
    s1 = w.server("s%d" % trial, os.path.join(jdir, "j.db"), wrap=mount_wrap(jdir, "4m"))
    mine = inside(s1, jdir)
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"includedNamespaces": ["bulk"]}})
    # the disk fills while the backup runs (a server that finds its
    # journal's disk full at start exits, which is another test)
    wait_for(lambda: w.get("%s/%s" % (BK, name)).get("status", {}).get("phase")
             not in (None, "", "New"), 30, "the backup to be claimed", interval=0.05)
    time.sleep(rng.uniform(0.0, 1.5))
    fill(os.path.join(mine, "filler"))
    full_for = rng.uniform(1.0, 4.0)
    time.sleep(full_for)
    os.unlink(os.path.join(mine, "filler"))
    w.wait_final("%s/%s" % (BK, name), 120, (s1,))
    w.check_backup(name)
    return "journal disk full for %.1fs" % full_for


def run_read_only(w, rng, trial):
    """The store is read-only for a while: writes wait for it (the
    location's config.readOnlyWait, 2 min by default) and the backup
    completes; so does the next one."""
    name = "ro%d" % trial
    sdir = w.root
    s1 = w.server("s%d" % trial, w.t.path("j-s%d.db" % trial),
                  wrap=lambda argv: ["unshare", "-m", "sh", "-c",
                                     "mount --bind '%s' '%s' && exec %s" % (
                                         sdir, sdir, " ".join("'%s'" % a for a in argv))])
    # the shell execs cairn only after the bind mount is in place
    wait_for(lambda: os.path.realpath("/proc/%d/exe" % s1.pid) == os.path.realpath(BIN),
             20, "the server in its mount namespace", interval=0.02)
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": name, "namespace": NS},
                          "spec": {"includedNamespaces": ["bulk"]}})
    time.sleep(rng.uniform(0.0, 2.0))
    # a mount with a file open for writing cannot turn read-only: try
    # between the store's writes (each publish closes its file)
    end = time.monotonic() + 5
    while True:
        ro = subprocess.run(["nsenter", "-t", str(s1.pid), "-m", "mount", "-o",
                             "remount,bind,ro", sdir], capture_output=True, text=True)
        if ro.returncode == 0:
            break
        if time.monotonic() > end:
            raise Trouble("cannot remount read-only: %s" % ro.stderr)
        time.sleep(0.01)
    phase = w.get("%s/%s" % (BK, name)).get("status", {}).get("phase")
    ro_for = rng.uniform(1.0, 3.0)
    time.sleep(ro_for)
    subprocess.run(["nsenter", "-t", str(s1.pid), "-m", "mount", "-o", "remount,bind,rw", sdir],
                   capture_output=True)
    w.wait_final("%s/%s" % (BK, name), 120, (s1,))
    w.check_backup(name)
    waited = "waited" if "writable again after" in s1.output() else "missed the window"
    again = name + "-again"
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": again, "namespace": NS},
                          "spec": {"includedNamespaces": ["bulk"]}})
    w.wait_final("%s/%s" % (BK, again), 120, (s1,))
    w.check_backup(again)
    return "store read-only for %.1fs from %s: completed (%s); the next one completed" % (
        ro_for, phase or "New", waited)


def can_mount():
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    d = "/tmp/cairn-chaos-probe-%d" % os.getpid()
    os.makedirs(d, exist_ok=True)
    ok = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs '%s'" % d],
                        capture_output=True).returncode == 0
    os.rmdir(d)
    return ok


def run_trial(w, rng, i, kind):
    """One trial of kind, numbered i, in world w; its note or Trouble."""
    if kind == "kill":
        return run_backup_kill(w, rng, i)
    if kind == "stop":
        return run_backup_kill(w, rng, i, stop_instead=True)
    if kind == "kill-restore":
        if w.base is None:
            s = w.server("sbase", w.t.path("j-base.db"))
            w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                                  "metadata": {"name": "base", "namespace": NS},
                                  "spec": {"includedNamespaces": ["bulk"]}})
            w.wait_final("%s/base" % BK, 120, (s,))
            w.check_backup("base")
            w.stop_all()
            w.base = "base"
        return run_restore_kill(w, rng, i, w.base)
    if kind in API_KINDS:
        return run_api_fault(w, rng, i, kind)
    if kind in S3_KINDS:
        return run_s3_fault(w, rng, i, kind)
    if kind == "disk-full":
        return run_disk_full(w, rng, i)
    return run_read_only(w, rng, i)


def trial_rng(seed, i):
    """Trial i's own generator: its draws do not depend on which trials ran
    before it or beside it (--jobs), so --only i replays it."""
    return random.Random("cairn-chaos-%d-%d" % (seed, i))


def campaign(seed, plan, objects, out=print, jobs=1, only=None):
    """Run the trials of plan [(kind, count)] on `jobs` workers, each with
    worlds of its own (kubesim, store, S3: faults and kills of one trial
    never touch another's); returns (counts, failures)."""
    rng = random.Random(seed)
    counts = {"trials": 0, "ok": 0, "lost_or_dup": 0, "not_completed": 0, "skipped": 0}
    failures = []
    out("# chaos seed %d: %s; %d objects; %d job%s" % (
        seed, ", ".join("%s x%d" % kc for kc in plan), objects, jobs, "s" if jobs > 1 else ""))
    mountable = can_mount()
    trials = [k for k, n in plan for _ in range(n)]
    rng.shuffle(trials)
    todo = [(i, kind) for i, kind in enumerate(trials, 1) if only is None or i in only]
    lock = threading.Lock()
    cases = []
    spent = {"world": 0.0, "check": 0.0, "trial": 0.0}

    def say(line):
        with lock:
            out(line)

    def worker(job):
        worlds = {}
        while True:
            with lock:
                if not todo:
                    break
                i, kind = todo.pop(0)
            if kind in ("disk-full", "read-only") and not mountable:
                with lock:
                    counts["skipped"] += 1
                say("trial %d %s: skipped (no mount namespaces here)" % (i, kind))
                continue
            key = "s3" if kind in S3_KINDS else "fs"
            if key not in worlds:
                t0 = time.monotonic()
                t = Case("chaos-%s-%d-%d" % (key, seed, job))
                with lock:
                    cases.append(t)
                worlds[key] = World(t, random.Random("%d-%s-%d" % (seed, key, job)), objects,
                                    s3=key == "s3")
                with lock:
                    spent["world"] += time.monotonic() - t0
            w = worlds[key]
            w.checked = 0.0
            w.sim.ok("DELETE", "/_sim/requests")     # each trial reads only its own
            with lock:
                counts["trials"] += 1
            t0 = time.monotonic()
            try:
                note = run_trial(w, trial_rng(seed, i), i, kind)
                with lock:
                    counts["ok"] += 1
                say("trial %d %s: ok (%.1fs, checks %.1fs): %s" % (
                    i, kind, time.monotonic() - t0, w.checked, note))
            except Trouble as e:
                msg = str(e)
                bucket = "lost_or_dup" if ("lost" in msg or "twice" in msg or "creates" in msg or
                                           "differs" in msg) else "not_completed"
                with lock:
                    counts[bucket] += 1
                    failures.append((i, kind, msg))
                say("trial %d %s: FAILED (seed %d): %s" % (i, kind, seed, msg[:1500]))
            except Exception as e:  # noqa: BLE001 - a broken trial is reported, the campaign goes on
                with lock:
                    counts["not_completed"] += 1
                    failures.append((i, kind, repr(e)))
                say("trial %d %s: ERROR (seed %d): %s" % (i, kind, seed,
                                                         traceback.format_exc()[-1500:]))
            finally:
                w.stop_all()
                with lock:
                    spent["trial"] += time.monotonic() - t0
                    spent["check"] += w.checked

    t_all = time.monotonic()
    threads = [threading.Thread(target=worker, args=(j,)) for j in range(max(1, jobs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in cases:
        t.finish()
    out("# chaos seed %d: %d trials, %d ok, %d lost or duplicated, %d not completed, %d skipped" % (
        seed, counts["trials"], counts["ok"], counts["lost_or_dup"], counts["not_completed"],
        counts["skipped"]))
    out("# time: %.0fs wall; summed over trials %.0fs (of which independent checks %.0fs), "
        "world set-up %.0fs" % (time.monotonic() - t_all, spent["trial"], spent["check"],
                                spent["world"]))
    return counts, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--kill", type=int, default=200, help="kill trials (backups)")
    ap.add_argument("--faults", type=int, default=20, help="trials of each other kind")
    ap.add_argument("--kinds", default=",".join(ALL_KINDS))
    ap.add_argument("--objects", type=int, default=3000)
    ap.add_argument("--jobs", type=int, default=1,
                    help="trials side by side, each job with worlds of its own")
    ap.add_argument("--only", default="",
                    help="run only these trial numbers of the seed's plan (e.g. 17,230)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    kinds = [k for k in a.kinds.split(",") if k]
    bad = [k for k in kinds if k not in ALL_KINDS]
    if bad:
        ap.error("unknown kinds %s (known: %s)" % (bad, ", ".join(ALL_KINDS)))
    plan = [(k, a.kill if k == "kill" else a.faults) for k in kinds]
    only = {int(x) for x in a.only.split(",") if x} or None
    counts, failures = campaign(seed, plan, a.objects, out=lambda s: print(s, flush=True),
                                jobs=a.jobs, only=only)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

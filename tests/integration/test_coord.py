"""Many servers, one owner (issue 8): claims, Leases, takeover, shards.

Each case starts kubesim with cairn's CRDs, one token per server (each
server talks through its own kubeconfig context `kubesim-<id>`, so the
request log and fault rules tell the servers apart), an fs storage
location, and several `cairn server` processes with short Lease timings
(lease 3s, renew deadline 2s, retry 500ms). What is checked is what a user
or an auditor would: the phases and claims of the objects, kubesim's
request log, the part files in storage, the tarballs, the Leases.
"""
import json
import os
import re
import urllib.parse
import subprocess
import tarfile
import threading
import time

from cairntest import BIN, case, main, wait_for, CheckFailed, cairn
from partwatch import PartWatch

NS = "cairn-system"
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
TIMINGS = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"]
FINAL = ("Completed", "PartiallyFailed", "Failed", "FailedValidation")


def setup(t, servers, root=None):
    tokens = {"admin": "admin-token"}
    tokens.update({s: "tok-" + s for s in servers})
    sim = t.kubesim(tokens=tokens)
    sim.install_crds(NS)
    root = root or t.mkdir("store")
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": root}, "default": True}})
    return sim, root


def server(t, sim, sid, part_size=4096, workers=1, journal=None, extra=()):
    journal = journal or t.path("journal-%s.db" % sid)
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--context", "kubesim-" + sid,
                    "--namespace", NS, "--server-id", sid, "--journal", journal,
                    "--part-size", str(part_size), "--workers", str(workers),
                    "--log-level", "info"] + TIMINGS + list(extra), name="server-" + sid)


def seed_bulk(sim, ns, n, payload=200):
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": ns}})
    # hex of random bytes: compresses to about half, so parts fill
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap",
              "data": {"payload": os.urandom(payload // 2).hex()}}, n, name="cm-{i:06d}", namespace=ns)


def create_backup(sim, name, spec, labels=None):
    md = {"name": name, "namespace": NS}
    if labels:
        md["labels"] = labels
    return sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup", "metadata": md,
                               "spec": spec})


def get_backup(sim, name):
    return sim.ok("GET", "%s/%s" % (BK, name))


def status(sim, name):
    return get_backup(sim, name).get("status", {})


def wait_final(sim, name, timeout=60, procs=()):
    def done():
        st = status(sim, name)
        return st if st.get("phase") in FINAL else None
    return wait_for(done, timeout, "backup %s to finish" % name, interval=0.1)


def find_tarball(root, name):
    for d, _, files in os.walk(root):
        if name + ".tar.gz" in files and ".cairn-uploads" not in d:
            return os.path.join(d, name + ".tar.gz")
    raise CheckFailed("%s.tar.gz not found under %s" % (name, root))


def tar_items(t, path):
    """Legacy item paths of a tarball, checked with GNU tar and tarfile."""
    r = subprocess.run(["tar", "tzf", path], capture_output=True, text=True)
    t.check(r.returncode == 0, "GNU tar cannot read %s: %s" % (path, r.stderr))
    with tarfile.open(path, "r:gz") as tf:
        names = tf.getnames()
    t.eq(r.stdout.split(), names, "GNU tar and tarfile listings")
    t.eq(names[0], "metadata/version", "first entry")
    return [n for n in names if n.startswith("resources/") and "-preferredversion/" not in n]


def check_every_item_once(t, root, name, ns, n):
    legacy = tar_items(t, find_tarball(root, name))
    cms = [x for x in legacy if x.startswith("resources/configmaps/namespaces/%s/" % ns)]
    t.eq(len(cms), len(set(cms)), "%s: items unique" % name)
    want = {"resources/configmaps/namespaces/%s/cm-%06d.json" % (ns, i) for i in range(n)}
    t.check(want <= set(cms), "%s: missing %s" % (name, sorted(want - set(cms))[:3]))
    return legacy


def parts_stored(proc):
    return [int(x) for x in re.findall(r"part (\d+) stored", proc.output())]


def status_writes(sim, name):
    """(token, status, time) of the status writes to one backup, from kubesim's log."""
    path = "%s/%s/status" % (BK, name)
    return [(r["token"], r["status"], r["time"]) for r in sim.requests()
            if r["path"] == path and r["method"] in ("PUT", "PATCH")]


def log_time(line):
    """Wall time (epoch seconds) of a cairn log line."""
    import datetime
    ts = line.split(" ", 1)[0]
    return datetime.datetime.strptime(ts[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


@case
def coord_claim_stale_rv_conflicts(t):
    """The original report's check: New -> InProgress twice from one read."""
    sim, _ = setup(t, [])
    create_backup(sim, "race", {})
    b = get_backup(sim, "race")
    t.check(b.get("status", {}).get("phase") in (None, "", "New"), "starts New: %r" % b.get("status"))
    rv = b["metadata"]["resourceVersion"]
    first = dict(b, status={"phase": "InProgress", "claim": {"holder": "a", "worker": "a/0", "attempt": 1}})
    code, body, _ = sim.request("PUT", "%s/race/status" % BK, first)
    t.eq(code, 200, "first claim with the RV read")
    t.check(body["metadata"]["resourceVersion"] != rv, "the claim changed the resourceVersion")
    second = dict(b, status={"phase": "InProgress", "claim": {"holder": "b", "worker": "b/0", "attempt": 1}})
    code, body, _ = sim.request("PUT", "%s/race/status" % BK, second)
    t.eq(code, 409, "second claim with the same, now stale RV")
    t.eq(body.get("reason"), "Conflict", "reason")
    t.eq(status(sim, "race")["claim"]["holder"], "a", "the first claim stands")


@case
def coord_three_servers_thirty_backups(t):
    servers = ["s1", "s2", "s3"]
    sim, root = setup(t, servers)
    # ~500 items per part (deflate output arrives in ~40-64 KiB steps, past
    # the small part size), so 2000 items give several parts even when the
    # compression thread lags behind the list.
    n = 2000
    seed_bulk(sim, "bulk", n)
    procs = [server(t, sim, s, workers=4) for s in servers]
    wait_for(lambda: len(sim.ok("GET", LEASES)["items"]) == 3, 20, "three Leases")
    names = ["b%02d" % i for i in range(30)]
    threads = [threading.Thread(target=create_backup, args=(
        sim, nm, {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]}))
        for nm in names]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for nm in names:
        st = wait_final(sim, nm, timeout=150)
        t.eq(st["phase"], "Completed", "phase of " + nm)
        t.eq(st["claim"]["attempt"], 1, "attempt of " + nm)
    print("# 30 backups (%d items each) by 3 servers x 4 workers: created and all Completed "
          "in %.1fs" % (n, time.monotonic() - t0))
    owners = {}
    for nm in names:
        writes = status_writes(sim, nm)
        ok_tokens = {tok for tok, code, _ in writes if code == 200}
        t.eq(len(ok_tokens), 1, "servers that wrote %s's status" % nm)
        owner = ok_tokens.pop()
        owners[owner] = owners.get(owner, 0) + 1
        t.eq(status(sim, nm)["claim"]["holder"], owner, "holder of %s is the only writer" % nm)
        # the claim is the first successful write; every earlier one is a lost race
        first_ok = next(i for i, w in enumerate(writes) if w[1] == 200)
        t.check(all(w[1] == 409 for w in writes[:first_ok]), "%s: writes before the claim %s" %
                (nm, writes[:first_ok]))
        parts = status(sim, nm)["checkpoint"]["parts"]
        # deflate hands out about 64 KiB at a time, so a part is at least that
        t.check(len(parts) >= 2, "%s has several parts: %d" % (nm, len(parts)))
        check_every_item_once(t, root, nm, "bulk", n)
    claims = sum(len(re.findall(r"backup %s/b\d\d: claimed by s\d/\d" % NS, p.output())) for p in procs)
    t.eq(claims, 30, "claims logged by all servers together")
    lost = sum(len(re.findall(r"claimed by someone else first", p.output())) for p in procs)
    print("# backups per server: %s; claim races lost (409): %d" % (sorted(owners.items()), lost))
    t.check(len(owners) >= 2, "work spread over servers: %s" % owners)


def big_backup_setup(t, servers, n=2500, delay=0.4):
    sim, root = setup(t, servers)
    seed_bulk(sim, "bulk", n, payload=120)
    # slow list pages so kills and partitions land mid-backup
    # ConfigMap lists of bulk (backups list namespace by namespace)
    slow = {"method": "GET", "path": "^/api/v1/(namespaces/bulk/)?configmaps$", "delay": delay,
            "count": 100000}
    sim.faults(slow)
    return sim, root, slow


def spec_bulk():
    return {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]}


def wait_parts(sim, name, k, timeout=60):
    def have():
        st = status(sim, name)
        p = st.get("checkpoint", {}).get("parts", [])
        return st if len(p) >= k else None
    return wait_for(have, timeout, "%d checkpointed parts of %s" % (k, name), interval=0.02)


def a_owns_b_waits(t, name, k, past_first_page=False):
    """Servers a and b over a slow big backup that a claims, with k parts
    checkpointed (past_first_page: and the last of them past the first
    list page, so the checkpoint holds a continue token); the fs part files
    are watched."""
    sim, root, slow = big_backup_setup(t, ["a", "b"])
    watch = PartWatch(root)
    t.on_cleanup(watch.close)
    a = server(t, sim, "a")
    wait_for(lambda: sim.get(LEASES + "/cairn-a")[0] == 200, 20, "a's Lease")
    create_backup(sim, name, spec_bulk())
    wait_for(lambda: status(sim, name).get("claim", {}).get("holder") == "a", 20, "a claims")
    b = server(t, sim, "b")
    wait_for(lambda: sim.get(LEASES + "/cairn-b")[0] == 200, 20, "b's Lease")
    wait_parts(sim, name, k)
    if past_first_page:
        wait_for(lambda: status(sim, name)["checkpoint"].get("listContinue"), 60,
                 "a part past the first list page", interval=0.02)
    return sim, root, slow, watch, a, b


@case
def coord_kill9_takeover(t):
    # past the first page: b must go on with a's continue token
    sim, root, _, watch, a, b = a_owns_b_waits(t, "big", 3, past_first_page=True)
    a.kill9()
    t_kill = time.monotonic()
    w_kill = time.time()
    before = status(sim, "big")
    done = {p["number"]: p["etag"] for p in before["checkpoint"]["parts"]}
    k = max(done)
    t.eq(before["claim"]["holder"], "a", "holder at the kill")

    def taken():
        st = status(sim, "big")
        return st if st.get("claim", {}).get("holder") == "b" else None
    st = wait_for(taken, 20, "b to take over", interval=0.02)
    t_take = time.monotonic() - t_kill
    t.eq(st["claim"]["attempt"], 2, "attempt after takeover")
    t.eq(st["phase"], "InProgress", "phase after takeover")

    def progressed():
        s2 = status(sim, "big")
        return len(s2.get("checkpoint", {}).get("parts", [])) > len(done) or s2.get("phase") in FINAL
    wait_for(progressed, 30, "progress after takeover", interval=0.02)
    t_resume = time.monotonic() - t_kill
    bound = LEASE + 2 * RETRY
    print("# kill -9 to takeover claim: %.2fs, to resumed progress: %.2fs "
          "(lease %.1fs + 2 x retry %.1fs = %.1fs)" % (t_take, t_resume, LEASE, RETRY, bound))
    t.check(t_take <= bound, "takeover took %.2fs > lease + 2 x retry (%.1fs)" % (t_take, bound))
    sim.clear_faults()
    fin = wait_final(sim, "big", timeout=90)
    t.eq(fin["phase"], "Completed", "final phase")
    t.eq(fin["claim"], dict(fin["claim"], holder="b", attempt=2), "final claim")
    stored_b = parts_stored(b)
    t.check(stored_b and min(stored_b) == k + 2, "b continued at part %s, want last+2 = %d" %
            (stored_b[:3], k + 2))
    t.check(not set(stored_b) & set(done), "b uploaded checkpointed parts again: %s" % stored_b)
    final_parts = {p["number"]: p["etag"] for p in fin["checkpoint"]["parts"]}
    for num, etag in done.items():
        t.eq(final_parts.get(num), etag, "part %d kept with its ETag" % num)
    t.check(k + 1 not in final_parts, "the skipped number %d is not in the part list" % (k + 1))
    # storage evidence: no checkpointed part file was written again after the kill
    watch.close()
    rewritten = {n: v for n, v in watch.seen.items() if n <= k and v[1] > w_kill}
    t.check(not rewritten, "checkpointed part files written after the kill: %s" % rewritten)
    t.check(all(n in watch.seen for n in done), "part files seen: %s" % sorted(watch.seen))
    legacy = check_every_item_once(t, root, "big", "bulk", 2500)
    t.eq(len(legacy), 2500, "every item once")
    t.check(re.search(r"taken over from a by b/0 \(attempt 2\)", b.output()), "b logs the takeover")
    # b went on with a's list where a's last part ended (status.checkpoint
    # .listContinue), not from the first page
    tok = before["checkpoint"].get("listContinue")
    t.check(tok, "status.checkpoint.listContinue at the kill: %s" % before["checkpoint"])
    lists = [q for q in sim.requests() if q["method"] == "GET" and
             q["path"] == "/api/v1/namespaces/bulk/configmaps" and q["time"] >= w_kill and
             urllib.parse.parse_qs(q["query"]).get("limit") != ["1"]]
    t.check(lists and urllib.parse.parse_qs(lists[0]["query"]).get("continue") == [tok],
            "b's first list after the takeover: %s" % (lists[:1],))


@case
def coord_partition_fences_old_owner(t):
    sim, root, slow, watch, a, b = a_owns_b_waits(t, "part", 2)
    # the partition: every request of a's token is dropped
    sim.clear_faults()
    sim.faults([{"token": "a", "drop": True, "count": 10000000}, slow])
    t_part = time.time()
    cut = status(sim, "part")
    k = max(p["number"] for p in cut["checkpoint"]["parts"])

    def taken():
        st = status(sim, "part")
        return st if st.get("claim", {}).get("holder") == "b" else None
    st = wait_for(taken, 20, "b to take over", interval=0.02)
    t_take = time.time()
    t.eq(st["claim"]["attempt"], 2, "attempt after takeover")
    print("# partition to takeover: %.2fs" % (t_take - t_part))
    # let b make progress while a is still cut off, then heal
    wait_for(lambda: len(status(sim, "part").get("checkpoint", {}).get("parts", [])) > len(st["checkpoint"]["parts"]),
             30, "b's progress")
    time.sleep(1.0)
    sim.clear_faults()
    sim.faults(slow)
    t_heal = time.time()
    wait_for(lambda: re.search(r"claim lost .*attempt 2|ownership lost|ownership of backup", a.output()),
             30, "a to stand down after the partition heals")
    sim.clear_faults()
    fin = wait_final(sim, "part", timeout=90)
    t.eq(fin["phase"], "Completed", "final phase")
    t.eq(fin["claim"]["holder"], "b", "final holder")
    watch.close()
    # a stopped uploading before its Lease could expire: a's part numbers are
    # those up to k+1 (b starts at k+2); none was written after the fence time
    fence = t_part + RENEW + 0.3
    late = {n: v for n, v in watch.seen.items() if n <= k + 1 and v[1] > fence}
    t.check(not late, "part files of a written after its fence time: %s" % late)
    t.check(min(parts_stored(b)) >= k + 2, "b's parts start after a's: %s" % parts_stored(b)[:3])
    t.check("writes paused" in a.output() or "not renewed within" in a.output(),
            "a noticed its Lease lapse")
    # after the takeover, a wrote nothing to the backup: no successful write
    # of its token (any write it tried failed on the resourceVersion)
    a_writes = [w for w in status_writes(sim, "part") if w[0] == "a" and w[2] > t_take]
    t.check(all(code in (0, 409) for _, code, _ in a_writes), "a's writes after takeover: %s" % a_writes)
    later_a = [r for r in sim.requests() if r["token"] == "a" and r["time"] > t_heal and
               r["method"] in ("PUT", "POST", "PATCH", "DELETE") and "/backups/part" in r["path"]
               and r["status"] == 200]
    t.eq(later_a, [], "a's successful writes to the backup after healing")
    t.check(a.alive(), "a keeps running (it stood down from one item)")
    legacy = check_every_item_once(t, root, "part", "bulk", 2500)
    t.eq(len(legacy), 2500, "every item once")
    print("# a's last part-file write %.2fs after the partition (fence at %.1fs)" % (
        max([v[1] for n, v in watch.seen.items() if n <= k + 1] or [t_part]) - t_part, RENEW))


@case
def coord_restart_same_id_resumes_at_once(t):
    sim, root, _ = big_backup_setup(t, ["a", "b"])
    journal = t.path("journal-a.db")
    a = server(t, sim, "a", journal=journal)
    create_backup(sim, "again", spec_bulk())
    wait_parts(sim, "again", 2)
    a.kill9()
    k = max(p["number"] for p in status(sim, "again")["checkpoint"]["parts"])
    t0 = time.monotonic()
    a2 = server(t, sim, "a", journal=journal)
    wait_for(lambda: "resuming (attempt 1)" in a2.output(), 10, "a resuming", interval=0.02)
    dt = time.monotonic() - t0
    print("# restart with the same id resumed after %.2fs (lease %.1fs)" % (dt, LEASE))
    t.check(dt < LEASE, "resumed after %.2fs, not before the Lease could expire" % dt)
    sim.clear_faults()
    fin = wait_final(sim, "again", timeout=60)
    t.eq(fin["phase"], "Completed", "final phase")
    t.eq(fin["claim"]["attempt"], 1, "same attempt")
    stored = parts_stored(a2)
    t.check(stored and min(stored) in (k + 1, k + 2), "resumed at %s after checkpoint %d" % (stored[:2], k))
    check_every_item_once(t, root, "again", "bulk", 2500)


@case
def coord_sigterm_hands_over(t):
    sim, root, _ = big_backup_setup(t, ["a", "b"], n=2500, delay=0.6)
    a = server(t, sim, "a", extra=["--shutdown-grace", "5s"])
    create_backup(sim, "term", spec_bulk())
    wait_for(lambda: status(sim, "term").get("claim", {}).get("holder") == "a", 20, "a claims")
    b = server(t, sim, "b")
    wait_parts(sim, "term", 2)
    t0 = time.monotonic()
    a.signal(15)
    rc = a.wait(15)
    dt = time.monotonic() - t0
    t.eq(rc, 0, "exit code after SIGTERM")
    t.check(dt < 5.0 + 1.0, "exited within the grace period: %.2fs" % dt)
    lease = sim.ok("GET", LEASES + "/cairn-a")
    t.eq(lease["spec"].get("holderIdentity", ""), "", "a's Lease released")
    st = status(sim, "term")
    t.check(st["phase"] == "InProgress" and st["claim"]["holder"] in ("", "b"),
            "claim released: %s %s" % (st["phase"], st["claim"]))
    t.check("claim released" in a.output(), "a logged the release")
    t1 = time.monotonic()
    st = wait_for(lambda: (lambda s: s if s.get("claim", {}).get("holder") == "b" else None)(status(sim, "term")),
                  10, "b to take over", interval=0.02)
    print("# SIGTERM exit %.2fs; released item taken over %.2fs after exit" % (dt, time.monotonic() - t1))
    t.check(time.monotonic() - t1 < LEASE, "taken over at once, not after a Lease expiry")
    t.eq(st["claim"]["attempt"], 2, "attempt")
    sim.clear_faults()
    fin = wait_final(sim, "term", timeout=60)
    t.eq(fin["phase"], "Completed", "final phase")
    check_every_item_once(t, root, "term", "bulk", 2500)


@case
def coord_restores_claimed_once(t):
    """Restores go through the same claim protocol: one owner each."""
    sim, root = setup(t, ["r1", "r2"])
    seed_bulk(sim, "src", 40)
    procs = [server(t, sim, s, workers=2) for s in ("r1", "r2")]
    create_backup(sim, "base", {"includedNamespaces": ["src"]})
    t.eq(wait_final(sim, "base")["phase"], "Completed", "backup")
    rs = "/apis/cairn.io/v1/namespaces/%s/restores" % NS
    names = ["rs%d" % i for i in range(4)]
    for i, nm in enumerate(names):
        sim.ok("POST", rs, {"apiVersion": "cairn.io/v1", "kind": "Restore",
                            "metadata": {"name": nm, "namespace": NS},
                            "spec": {"backupName": "base", "includedNamespaces": ["src"],
                                     "namespaceMapping": {"src": "copy%d" % i}}})

    def final(nm):
        st = sim.ok("GET", "%s/%s" % (rs, nm)).get("status", {})
        return st if st.get("phase") in ("Completed", "PartiallyFailed", "Failed", "FailedValidation") else None
    holders = set()
    for i, nm in enumerate(names):
        st = wait_for(lambda: final(nm), 60, "restore " + nm)
        t.eq(st["phase"], "Completed", "phase of %s: %s" % (nm, st))
        t.eq(st["claim"]["attempt"], 1, "attempt")
        holders.add(st["claim"]["holder"])
        path = "%s/%s/status" % (rs, nm)
        ok = {r["token"] for r in sim.requests() if r["path"] == path and r["method"] == "PUT"
              and r["status"] == 200}
        t.eq(ok, {st["claim"]["holder"]}, "servers that wrote %s's status" % nm)
        cms = sim.ok("GET", "/api/v1/namespaces/copy%d/configmaps" % i)["items"]
        t.eq(len([c for c in cms if c["metadata"]["name"].startswith("cm-")]), 40,
             "configmaps restored into copy%d" % i)
    print("# restores by %s" % sorted(holders))


@case
def coord_shards(t):
    sim, root = setup(t, ["east", "west"])
    seed_bulk(sim, "bulk", 30)
    e = server(t, sim, "east", extra=["--shard-selector", "region=east"])
    w = server(t, sim, "west", extra=["--shard-selector", "region=west"])
    spec = {"includedNamespaces": ["bulk"], "includedResources": ["configmaps"]}
    for i in range(4):
        create_backup(sim, "e%d" % i, spec, {"region": "east"})
        create_backup(sim, "w%d" % i, spec, {"region": "west"})
    create_backup(sim, "nobody", spec, {"region": "north"})
    for i in range(4):
        t.eq(wait_final(sim, "e%d" % i)["claim"]["holder"], "east", "holder of e%d" % i)
        t.eq(wait_final(sim, "w%d" % i)["claim"]["holder"], "west", "holder of w%d" % i)
    time.sleep(4)  # longer than the CLI's unclaimed threshold
    st = status(sim, "nobody")
    t.check(st.get("phase") in (None, "", "New") and not st.get("claim"), "unmatched stays New: %s" % st)
    r = cairn("backup", "get", "nobody", "--kubeconfig", sim.kubeconfig, "--namespace", NS)
    t.eq(r.returncode, 0, "backup get: %s" % r.stderr)
    t.check("Waiting" in r.stdout, "shown as waiting: %s" % r.stdout)
    t.check(e.alive() and w.alive(), "servers running")


if __name__ == "__main__":
    main()

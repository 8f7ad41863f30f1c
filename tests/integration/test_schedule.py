"""Schedules end to end: two `cairn server`s against kubesim, fs storage.

- `@every 2s` with two servers: one Backup per due time (names
  <schedule>-<YYYYMMDDhhmmss> on the 2 s grid from the creation time; the
  request log shows exactly one successful create per name, the other
  server's attempts answered 409 AlreadyExists); pause stops it;
- skipImmediately (on create and on unpause) and the immediate backup of a
  new or unpaused schedule, ownerReferences when asked;
- invalid cron or template -> FailedValidation with the reason; the CLI
  refuses a bad --schedule with exit 2.
"""
import calendar
import time

from cairntest import BIN, case, main, wait_for, cairn

NS = "cairn-system"
SCHED = "/apis/cairn.io/v1/namespaces/%s/schedules" % NS
BK = "/apis/cairn.io/v1/namespaces/%s/backups" % NS
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS


def setup(t):
    sim = t.kubesim()
    sim.install_crds(NS)
    sim.ok("POST", BSL, {"apiVersion": "cairn.io/v1", "kind": "BackupStorageLocation",
                         "metadata": {"name": "default", "namespace": NS},
                         "spec": {"provider": "fs", "objectStorage": {"bucket": "bk"},
                                  "config": {"path": t.mkdir("store")}, "default": True,
                                  "validationFrequency": "0", "backupSyncPeriod": "0"}})
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "demo"}})
    sim.ok("POST", "/api/v1/namespaces/demo/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "b"}})
    return sim


def server(t, sim, sid):
    return t.spawn([BIN, "server", "--kubeconfig", sim.kubeconfig, "--namespace", NS,
                    "--server-id", sid, "--journal", t.path("journal-%s.db" % sid),
                    "--retry-period", "200ms"], name="server-" + sid)


def cli(sim, *args):
    r = cairn(*(list(args) + ["--kubeconfig", sim.kubeconfig, "--namespace", NS]))
    if r.returncode != 0:
        raise AssertionError("cairn %s -> %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def backups_of(sim, sched):
    st, lst, _ = sim.get(BK + "?labelSelector=cairn.io%%2Fschedule-name%%3D%s" % sched)
    return sorted(i["metadata"]["name"] for i in lst["items"])


def stamp(name):
    return calendar.timegm(time.strptime(name.rsplit("-", 1)[1], "%Y%m%d%H%M%S"))


def rfc(ts):
    return calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))


@case
def two_servers_one_backup_per_due_time(t):
    sim = setup(t)
    s1 = server(t, sim, "s1")
    s2 = server(t, sim, "s2")
    # Slow status writes make the servers' views of lastBackup stale, so
    # both go for the same due times and the create has to decide.
    sim.faults({"method": "PUT", "path": "/schedules/every2/status", "delay": 1.2,
                "count": 8})
    cli(sim, "schedule", "create", "every2", "--schedule", "@every 2s",
        "--include-namespaces", "demo", "--ttl", "1h")
    wait_for(lambda: len(backups_of(sim, "every2")) >= 5, 30, "5 scheduled backups")
    cli(sim, "schedule", "pause", "every2")
    time.sleep(1.5)		# a pass that read the schedule before the pause may finish
    at_pause = backups_of(sim, "every2")
    time.sleep(4)
    t.eq(backups_of(sim, "every2"), at_pause, "backups after pause")

    st, s, _ = sim.get(SCHED + "/every2")
    t.eq(s["status"]["phase"], "Enabled", "schedule phase")
    created = rfc(s["metadata"]["creationTimestamp"])
    stamps = [stamp(n) for n in at_pause]
    t.eq(stamps[0], created, "first backup at once, named for the creation time")
    t.check(all((x - created) % 2 == 0 for x in stamps), "due times on the 2 s grid: %s" % at_pause)
    t.eq(len(set(stamps)), len(stamps), "one backup per due time")
    t.check(all(b - a <= 4 for a, b in zip(stamps, stamps[1:])),
            "no due time skipped by more than one step: %s" % at_pause)
    t.eq(rfc(s["status"]["lastBackup"]), stamps[-1], "status.lastBackup = last due time")
    # The API server saw exactly one successful create per name.
    posts = [r for r in sim.requests() if r["method"] == "POST" and r["path"] == BK]
    ok = [r for r in posts if r["status"] == 201]
    lost = [r for r in posts if r["status"] == 409]
    t.eq(len(ok), len(at_pause), "successful creates")
    print("due times: %d, creates: %d ok, %d AlreadyExists (the other server)" %
          (len(at_pause), len(ok), len(lost)))
    t.check(len(lost) >= 1, "the servers never raced for a due time")
    t.eq(len(posts), len(ok) + len(lost), "every create was 201 or 409")
    st, b, _ = sim.get(BK + "/" + at_pause[0])
    t.eq(b["metadata"]["labels"]["cairn.io/schedule-name"], "every2", "label")
    t.check("cairn.io/backup-cleanup" in b["metadata"].get("finalizers", []), "cleanup finalizer")
    t.eq(b["spec"]["includedNamespaces"], ["demo"], "template copied")
    t.eq(b["spec"]["ttl"], "1h", "ttl copied")
    t.check("ownerReferences" not in b["metadata"], "no owner references unless asked")
    # The servers also ran the backups.
    wait_for(lambda: sim.get(BK + "/" + at_pause[0])[1].get("status", {}).get("phase")
             == "Completed", 30, "scheduled backup completed")
    r = cli(sim, "schedule", "get")
    t.check("every2" in r.stdout and "@every 2s" in r.stdout, "schedule get: %s" % r.stdout)
    r = cli(sim, "schedule", "describe", "every2")
    t.check("Backups:      %d" % len(at_pause) in r.stdout, "describe lists backups: %s" % r.stdout)
    for p in (s1, s2):
        t.check(p.alive(), "server died: %s" % p.output()[-2000:])


@case
def skip_immediately_pause_unpause_owner_refs(t):
    sim = setup(t)
    server(t, sim, "s1")
    cli(sim, "schedule", "create", "skip", "--schedule", "@every 1h", "--skip-immediately")
    cli(sim, "schedule", "create", "owned", "--schedule", "0 3 * * *",
        "--use-owner-references-in-backup", "--include-namespaces", "demo")
    cli(sim, "schedule", "create", "p1", "--schedule", "@every 1h", "--paused")
    cli(sim, "schedule", "create", "p2", "--schedule", "@every 1h", "--paused")

    wait_for(lambda: backups_of(sim, "owned"), 10, "immediate backup of a new schedule")
    st, owned, _ = sim.get(SCHED + "/owned")
    name = backups_of(sim, "owned")[0]
    t.eq(stamp(name), rfc(owned["metadata"]["creationTimestamp"]), "immediate backup name")
    st, b, _ = sim.get(BK + "/" + name)
    t.eq(b["metadata"]["ownerReferences"][0]["uid"], owned["metadata"]["uid"], "owner uid")
    t.eq(b["metadata"]["ownerReferences"][0]["kind"], "Schedule", "owner kind")

    def skipped():
        s = sim.get(SCHED + "/skip")[1]
        return s.get("status", {}).get("lastSkipped") and not s["spec"].get("skipImmediately")
    wait_for(skipped, 10, "skipImmediately consumed")
    wait_for(lambda: sim.get(SCHED + "/p1")[1].get("status", {}).get("phase") == "Enabled",
             10, "paused schedule enabled")
    time.sleep(2)
    t.eq(backups_of(sim, "skip"), [], "no immediate backup with --skip-immediately")
    t.eq(backups_of(sim, "p1") + backups_of(sim, "p2"), [], "no backups while paused")

    cli(sim, "schedule", "unpause", "p1", "--skip-immediately")
    cli(sim, "schedule", "unpause", "p2")
    wait_for(lambda: backups_of(sim, "p2"), 10, "backup at once after unpause")
    wait_for(lambda: sim.get(SCHED + "/p1")[1].get("status", {}).get("lastSkipped"), 10,
             "p1 skipped")
    time.sleep(2)
    t.eq(backups_of(sim, "p1"), [], "unpause --skip-immediately waits for the next due time")
    t.eq(len(backups_of(sim, "p2")), 1, "one backup after unpause")


@case
def invalid_schedules(t):
    sim = setup(t)
    server(t, sim, "s1")
    r = cairn("schedule", "create", "bad", "--schedule", "61 * * * *",
              "--kubeconfig", sim.kubeconfig)
    t.eq(r.returncode, 2, "bad --schedule exit code")
    t.check("minute" in r.stderr, "message names the field: %s" % r.stderr)
    for name, spec in (("badcron", {"schedule": "* * *", "template": {}}),
                       ("badttl", {"schedule": "@daily", "template": {"ttl": "forever"}})):
        sim.ok("POST", SCHED, {"apiVersion": "cairn.io/v1", "kind": "Schedule",
                               "metadata": {"name": name}, "spec": spec})

    def failed(name):
        s = sim.get(SCHED + "/" + name)[1].get("status", {})
        return s.get("phase") == "FailedValidation" and s.get("validationErrors")
    wait_for(lambda: failed("badcron"), 10, "FailedValidation of a bad cron")
    wait_for(lambda: failed("badttl"), 10, "FailedValidation of a bad template")
    msg = sim.get(SCHED + "/badcron")[1]["status"]["validationErrors"][0]
    t.check("invalid schedule" in msg and "5 fields" in msg, "message: %s" % msg)
    t.eq(backups_of(sim, "badcron") + backups_of(sim, "badttl"), [], "no backups")
    # Fixing the spec enables it.
    sim.patch(SCHED + "/badcron", {"spec": {"schedule": "@every 1h"}})
    wait_for(lambda: backups_of(sim, "badcron"), 10, "backup once fixed")


main()

"""Logs a user can read, describe, and the CLI gaps of issue #20, against
kubesim and a real `cairn server`:

- `backup logs`: Velero's line format (time, level, msg, backup=NS/NAME,
  resource= and namespace= fields), what was backed up per resource, what
  was listed empty, each warning; `restore logs` likewise;
- `backup describe`: only the files that exist in storage, --details
  lists the items per resource kind, -o json|yaml one document, long
  annotations cut; `restore describe --details` and -o json;
- `--labels` on `backup create` and `schedule create` (on the objects from
  their creation, so a --shard-selector sees them), `restore create
  --from-schedule`, `backup-location create --access-mode`, a location
  named "default" used when none is marked, `backup download` keeps an
  existing file without --force, an unknown subcommand names the nearest
  one, and no command prints the server's log lines.
"""
import gzip
import json
import os
import re

import yaml

from bkworld import BK, BSL, NS, RS, World
from cairntest import case, cairn, main, wait_for

LINE = re.compile(r'^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z" level=(info|warning|error) '
                  r'msg="(?:[^"\\]|\\.)*" (backup|restore)=cairn-system/\S+( [a-z]+=\S+)*$')
SERVER_LOG = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z (error|warn|info|debug|trace) ",
                        re.M)
SCHED = "cairn.io/schedule-name"


def cli(w, *args, **kw):
    r = cairn(*(list(args) + ["--kubeconfig", w.sim.kubeconfig, "-n", NS]), **kw)
    assert not SERVER_LOG.search(r.stderr), "server-style log lines from cairn %s:\n%s" % (
        " ".join(args), r.stderr)
    return r


def world(t, default=True):
    w = World(t)
    root = t.mkdir("store")
    w.fs_location(root, default=default)
    w.namespace("app")
    w.sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": "v"}},
               30, namespace="app", name="cm-{i:03d}")
    return w, root


@case
def logs_describe_and_labels(t):
    w, root = world(t)
    srv = w.server(extra=["--shard-selector", "shard=a"])
    r = cli(w, "backup", "create", "b1", "--include-namespaces", "app,ghost",
            "--labels", "shard=a,team=web")
    t.eq(r.returncode, 0, "create: %s" % r.stderr)
    t.eq(w.backup("b1")["metadata"].get("labels"), {"shard": "a", "team": "web"},
         "labels on the Backup from its creation")
    b = w.wait_backup("b1", srv=srv)
    t.eq((b["status"]["phase"], b["status"]["warnings"]), ("Completed", 1), "phase, warnings")
    bad = cli(w, "backup", "create", "b-bad", "--labels", "shard")
    t.eq(bad.returncode, 2, "--labels without =: usage error")

    # Logs: Velero's lines, per resource, the warning, the empty lists.
    r = cli(w, "backup", "logs", "b1")
    t.eq(r.returncode, 0, "logs: %s" % r.stderr)
    lines = r.stdout.splitlines()
    t.check(len(lines) >= 5, "more than a line for a whole backup: %r" % lines)
    for ln in lines:
        t.check(LINE.match(ln), "not a Velero-style line: %r" % ln)
    text = r.stdout
    t.check(re.search(r'msg="backed up 30 items.*" backup=cairn-system/b1 resource=configmaps$',
                      text, re.M), "the ConfigMaps' line:\n%s" % text)
    t.check(re.search(r'level=warning msg=".*ghost.*does not exist', text),
            "the warning about namespace ghost:\n%s" % text)
    t.check('msg="backing up to storage location default; namespaces: app, ghost' in text,
            "what the backup takes:\n%s" % text)
    t.check('msg="listed, no items to back up: ' in text, "empty resources in one line")

    # describe: the files that exist; --details; -o json|yaml.
    stored = sorted("backups/b1/" + f for f in os.listdir(os.path.join(root, "backups", "b1")))
    r = cli(w, "backup", "describe", "b1", "--details")
    t.eq(r.returncode, 0, "describe: %s" % r.stderr)
    for key in stored:
        t.check(key in r.stdout, "describe lacks stored file %s" % key)
    for never in ("podvolumebackups", "itemoperations", "volumeinfo"):
        t.check(never not in r.stdout, "describe names %s, never written" % never)
    t.check("Resource List:\n" in r.stdout and "  v1/ConfigMap: (30)\n" in r.stdout and
            "    - app/cm-007\n" in r.stdout and "  v1/Namespace: (1)\n    - app\n" in r.stdout,
            "describe --details:\n%s" % r.stdout[-1500:])
    doc = json.loads(cli(w, "backup", "describe", "b1", "--details", "-o", "json").stdout)
    t.eq(doc["backup"]["metadata"]["name"], "b1", "-o json: the backup")
    t.eq(sorted(f["key"] for f in doc["storageFiles"]), stored, "-o json: the files")
    t.eq(sorted(doc["storageFiles"], key=lambda f: f["key"])[0]["size"],
         os.path.getsize(os.path.join(root, stored[0])), "-o json: a file's size")
    t.eq(len(doc["resourceList"]["v1/ConfigMap"]), 30, "-o json: the resource list")
    y = yaml.safe_load(cli(w, "backup", "describe", "b1", "-o", "yaml").stdout)
    t.eq(y["backup"]["status"]["phase"], "Completed", "-o yaml")
    t.check("resourceList" not in y, "no resource list without --details")

    # Long annotations are cut in the text.
    w.sim.ok("PATCH", "%s/b1" % BK, {"metadata": {"annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"x": "y" * 5000})}}},
             content_type="application/merge-patch+json")
    out = cli(w, "backup", "describe", "b1").stdout
    t.check(max(len(ln) for ln in out.splitlines()) < 300, "a describe line over 300 characters")
    t.check("(5009 bytes; -o json shows all)" in out, "the cut annotation says its size:\n%s" % out[:800])

    # download keeps an existing file unless --force.
    r = cli(w, "backup", "download", "b1", cwd=t.dir)
    t.eq(r.returncode, 0, "download: %s" % r.stderr)
    with open(t.path("b1.tar.gz"), "wb") as f:
        f.write(b"mine")
    r = cli(w, "backup", "download", "b1", cwd=t.dir)
    t.eq(r.returncode, 1, "download over an existing file")
    t.check("exists" in r.stderr and "--force" in r.stderr, r.stderr)
    with open(t.path("b1.tar.gz"), "rb") as f:
        t.eq(f.read(), b"mine", "the existing file is kept")
    r = cli(w, "backup", "download", "b1", "--force", cwd=t.dir)
    t.eq(r.returncode, 0, "download --force")
    t.eq(os.path.getsize(t.path("b1.tar.gz")),
         os.path.getsize(os.path.join(root, "backups/b1/b1.tar.gz")), "replaced with --force")

    # A schedule with labels; a restore from its latest Completed backup.
    r = cli(w, "schedule", "create", "nightly", "--schedule", "@every 1h",
            "--include-namespaces", "app", "--labels", "shard=a")
    t.eq(r.returncode, 0, "schedule create: %s" % r.stderr)
    s = w.sim.ok("GET", "/apis/cairn.io/v1/namespaces/%s/schedules/nightly" % NS)
    t.eq(s["metadata"].get("labels"), {"shard": "a"}, "labels on the Schedule")
    t.eq(s["spec"]["template"]["metadata"]["labels"], {"shard": "a"}, "... and in its template")

    def scheduled():
        items = w.sim.ok("GET", BK + "?labelSelector=%s%%3Dnightly" % SCHED)["items"]
        return [b for b in items if b.get("status", {}).get("phase") == "Completed"]
    sb = wait_for(scheduled, 60, "the schedule's first backup")[0]
    t.eq(sb["metadata"]["labels"].get("shard"), "a", "the schedule's backup carries its labels")
    r = cli(w, "restore", "create", "r1", "--from-schedule", "nightly",
            "--namespace-mappings", "app:app2", "--labels", "shard=a")
    t.eq(r.returncode, 0, "restore --from-schedule: %s" % r.stderr)
    rs = w.sim.ok("GET", "%s/r1" % RS)
    t.eq((rs["spec"]["backupName"], rs["spec"].get("scheduleName")),
         (sb["metadata"]["name"], "nightly"), "the restore's backup and schedule")
    r = cli(w, "restore", "create", "--from-schedule", "nosuch")
    t.eq(r.returncode, 1, "a schedule without backups")
    t.check('schedule "nosuch" has no Completed backup' in r.stderr, r.stderr)
    t.eq(cli(w, "restore", "create", "--from-schedule", "nightly", "--from-backup", "b1").returncode,
         2, "both sources: usage error")
    t.eq(rs["metadata"].get("labels"), {"shard": "a"}, "the restore's labels")
    r1 = w.wait_restore("r1", srv=srv)
    t.eq(r1["status"]["phase"], "Completed", "restore phase")
    r = cli(w, "restore", "logs", "r1")
    for ln in r.stdout.splitlines():
        t.check(LINE.match(ln), "not a Velero-style restore line: %r" % ln)
    r = cli(w, "restore", "describe", "r1", "--details")
    t.check("Schedule                  nightly" in r.stdout and "Resource List:" in r.stdout and
            "app2/cm-001(created)" in r.stdout, "restore describe --details:\n%s" % r.stdout[-1500:])
    doc = json.loads(cli(w, "restore", "describe", "r1", "-o", "json").stdout)
    t.eq(doc["restore"]["status"]["phase"], "Completed", "restore describe -o json")
    t.check("results" in doc, "-o json carries the results")


@case
def locations_and_command_names(t):
    w, root = world(t, default=False)     # "default" exists but is not marked
    srv = w.server()
    w.create_backup("b-by-name", {"includedNamespaces": ["app"]})
    b = w.wait_backup("b-by-name", srv=srv)
    t.eq(b["status"]["phase"], "Completed", "a location named default is the default")
    t.check(os.path.exists(os.path.join(root, "backups/b-by-name/b-by-name.tar.gz")), "stored there")
    r = cli(w, "backup-location", "get")
    t.check(re.search(r"^default .* true \(by its name\)$", r.stdout, re.M), r.stdout)

    ro = t.mkdir("ro")
    r = cli(w, "backup-location", "create", "ro", "--provider", "fs", "--config", "path=" + ro,
            "--access-mode", "ReadOnly")
    t.eq(r.returncode, 0, "create --access-mode ReadOnly: %s" % r.stderr)
    t.eq(w.sim.ok("GET", "%s/ro" % BSL)["spec"]["accessMode"], "ReadOnly", "accessMode")
    t.eq(cli(w, "backup-location", "create", "rw", "--provider", "fs", "--config",
             "path=" + ro, "--access-mode", "Sometimes").returncode, 2, "bad --access-mode")
    w.create_backup("b-ro", {"storageLocation": "ro"})
    b = w.wait_backup("b-ro", srv=srv)
    t.eq(b["status"]["phase"], "FailedValidation", "no backup to a ReadOnly location")

    for typed, want in ((["backup", "creat", "x"], "backup create"),
                        (["bakup", "get"], "backup get"),
                        (["restore", "lgos", "r"], "restore logs"),
                        (["schedule", "pase", "s"], "schedule pause")):
        r = cli(w, *typed)
        t.eq(r.returncode, 2, "exit code of %s" % typed)
        t.check('did you mean "%s"?' % want in r.stderr, "%s: %r" % (typed, r.stderr))
    r = cli(w, "backup", "frobnicate")
    t.check("unknown command \"backup frobnicate\"" in r.stderr and "backup create" in r.stderr,
            "an unknown subcommand lists the group: %r" % r.stderr)
    # the library's log lines come back with --log-level
    r = cairn("backup", "delete", "b-by-name", "--confirm", "--log-level", "info",
              "--kubeconfig", w.sim.kubeconfig, "-n", NS)
    t.eq(r.returncode, 0, "delete: %s" % r.stderr)


main()

"""`cairn backup-location create|get` against kubesim, and the locations it
writes opened by storage/location.c against s3rver and a directory (the
same mapping the server uses)."""
import base64
import glob
import json
import os
import subprocess

import yaml

from cairntest import SRCDIR, cairn, case, main, wait_for
from s3rver import S3rver, storage_tool_path

NS = "cairn-system"
BSL = "/apis/cairn.io/v1/namespaces/%s/backupstoragelocations" % NS
SECRETS = "/api/v1/namespaces/%s/secrets" % NS


def setup(t):
    sim = t.kubesim()
    for path in sorted(glob.glob(os.path.join(SRCDIR, "schema/crds/*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    sim.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": NS}})
    wait_for(lambda: sim.get(BSL)[0] == 200, 10, "backupstoragelocations served")
    return sim


def cli(sim, *args):
    return cairn(*(list(args) + ["--kubeconfig", sim.kubeconfig]))


def use_location(t, sim, name, env=None):
    """Open the stored location as the server does (BSL + Secret), put and get."""
    bsl = sim.ok("GET", "%s/%s" % (BSL, name))
    path = t.path("%s.json" % name)
    with open(path, "w") as f:
        json.dump(bsl, f)
    argv = [storage_tool_path(), "--bsl", path]
    cred = (bsl["spec"].get("credential") or {}).get("name")
    if cred:
        sec = sim.ok("GET", "%s/%s" % (SECRETS, cred))
        cpath = t.path("%s.creds" % name)
        with open(cpath, "wb") as f:
            f.write(base64.b64decode(sec["data"][bsl["spec"]["credential"]["key"]]))
        argv += ["--creds-file", cpath]
    data = t.path("data")
    with open(data, "wb") as f:
        f.write(os.urandom(5000))
    r = subprocess.run(argv + ["put", "backups/b1/velero-backup.json", data],
                       capture_output=True, text=True, env=env)
    t.check(r.returncode == 0, "put through location %s: %s" % (name, r.stderr))
    r = subprocess.run(argv + ["get", "backups/b1/velero-backup.json", t.path("back")],
                       capture_output=True, text=True, env=env)
    t.check(r.returncode == 0, "get through location %s: %s" % (name, r.stderr))
    with open(t.path("back"), "rb") as a, open(data, "rb") as b:
        t.check(a.read() == b.read(), "bytes through location %s" % name)


@case
def create_s3_and_fs(t):
    sim = setup(t)
    s3 = S3rver(t)
    r = cli(sim, "backup-location", "create", "minio", "--provider", "s3", "--bucket", "cairn",
            "--prefix", "site-a", "--config",
            "endpoint=%s,region=eu-central-1,forcePathStyle=true" % s3.endpoint,
            "--credential-file", s3.creds_file, "--default")
    t.eq(r.returncode, 0, "create s3 exit code (%s)" % r.stderr)
    t.check('"minio" created (s3 bucket cairn, with prefix)' in r.stdout, r.stdout)
    bsl = sim.ok("GET", "%s/minio" % BSL)
    spec = bsl["spec"]
    t.eq((spec["provider"], spec["objectStorage"], spec["default"]),
         ("s3", {"bucket": "cairn", "prefix": "site-a"}, True), "spec")
    t.eq(spec["config"], {"endpoint": s3.endpoint, "region": "eu-central-1",
                          "forcePathStyle": "true"}, "config")
    t.eq(spec["credential"], {"name": "cairn-location-minio", "key": "cloud"}, "credential ref")
    sec = sim.ok("GET", "%s/cairn-location-minio" % SECRETS)
    with open(s3.creds_file, "rb") as f:
        t.eq(base64.b64decode(sec["data"]["cloud"]), f.read(), "credentials in the Secret")
    # an env with no AWS variables: the Secret's credentials must be used
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    use_location(t, sim, "minio", env=env)
    listed = s3.aws("s3", "ls", "--recursive", "s3://cairn/").stdout
    t.check("backups/b1/velero-backup.json" in listed, "aws lists what went through: %s" % listed)

    store = t.path("dir-store")
    r = cli(sim, "backup-location", "create", "local", "--provider", "fs",
            "--config", "path=%s" % store, "--default")
    t.eq(r.returncode, 0, "create fs exit code (%s)" % r.stderr)
    t.check('"minio" is no longer the default' in r.stdout, r.stdout)
    t.check(not os.path.exists(store), "create made the directory on the client machine")
    t.eq(sim.ok("GET", "%s/minio" % BSL)["spec"]["default"], False, "old default cleared")
    use_location(t, sim, "local")
    t.check(os.path.exists(os.path.join(store, "backups/b1/velero-backup.json")),
            "the fs location wrote under its path")

    r = cli(sim, "backup-location", "get")
    t.eq(r.returncode, 0, "get exit code")
    lines = r.stdout.splitlines()
    t.eq(lines[0].split()[:4], ["NAME", "PROVIDER", "BUCKET/PREFIX", "PHASE"], "table header")
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    t.eq(rows["minio"][1:3], ["s3", "cairn/site-a"], "minio row")
    t.eq(rows["minio"][-1], "false", "minio not default")
    t.eq(rows["local"][1:3], ["fs", store], "local row")
    t.eq(rows["local"][-1], "true", "local default")
    one = json.loads(cli(sim, "backup-location", "get", "minio", "-o", "json").stdout)
    t.eq(one["spec"]["objectStorage"]["bucket"], "cairn", "get -o json")
    many = yaml.safe_load(cli(sim, "backup-location", "get", "-o", "yaml").stdout)
    t.eq(sorted(i["metadata"]["name"] for i in many["items"]), ["local", "minio"], "get -o yaml")
    r = cli(sim, "backup-location", "get", "nope")
    t.check(r.returncode == 1 and 'backup-location "nope" not found' in r.stderr, r.stderr)


@case
def bad_input(t):
    sim = setup(t)
    r = cli(sim, "backup-location", "create", "x", "--provider", "gcp")
    t.check(r.returncode == 2 and "--provider must be fs or s3" in r.stderr, r.stderr)
    r = cli(sim, "backup-location", "create", "x", "--provider", "s3")
    t.check(r.returncode == 2 and "needs --bucket" in r.stderr, r.stderr)
    r = cli(sim, "backup-location", "create", "x", "--provider", "fs")
    t.check(r.returncode == 1 and "spec.config.path" in r.stderr, r.stderr)
    bad = t.path("bad-creds")
    with open(bad, "w") as f:
        f.write("aws_access_key_id\n")
    r = cli(sim, "backup-location", "create", "x", "--provider", "s3", "--bucket", "b-1",
            "--credential-file", bad)
    t.check(r.returncode == 1 and "line 1" in r.stderr and
            len(r.stderr.strip().splitlines()) == 1, r.stderr)
    r = cli(sim, "backup-location", "create", "x", "--provider", "s3", "--bucket", "b-1",
            "--credential-file", t.path("missing"))
    t.check(r.returncode == 1 and "No such file" in r.stderr, r.stderr)
    good = t.path("creds")
    with open(good, "w") as f:
        f.write("[default]\naws_access_key_id=A\naws_secret_access_key=B\n")
    r = cli(sim, "backup-location", "create", "x", "--provider", "s3", "--bucket", "b-1",
            "--credential-file", good, "--config", "endpoint=ftp://somewhere")
    t.check(r.returncode == 1 and "http://" in r.stderr, r.stderr)
    t.eq(sim.get("%s/x" % BSL)[0], 404, "nothing created after bad input")
    t.eq(sim.get("%s/cairn-location-x" % SECRETS)[0], 404, "no Secret after bad input")
    r = cli(sim, "backup-location", "create", "x", "--provider", "fs", "--config", "path=/tmp/x")
    t.eq(r.returncode, 0, "create (%s)" % r.stderr)
    r = cli(sim, "backup-location", "create", "x", "--provider", "fs", "--config", "path=/tmp/x")
    t.check(r.returncode == 1 and "already exists" in r.stderr, r.stderr)


main()

"""test_kube_pushback: cairn's client against an API server that pushes back
(API Priority and Fairness answers 429 with Retry-After when a flow is over
its share): `cairn server` with its default flags restores a namespace while
kubesim answers 429 to a share of the creates. The restore completes with
no error, every object is there, and no request went out before the
Retry-After its 429 named: neither the re-sent create (same method, path
and body) nor, once the 429 had arrived, any other create of that flow.
A watch open in a pushed-back flow does not hold the flow's window.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cairntest import BUILDDIR, case, main, wait_for  # noqa: E402
from bkworld import World  # noqa: E402
import reqlog  # noqa: E402

APP = "app"
N = 400
RA = 1          # Retry-After, seconds
PUSHBACKS = 3
SLACK = reqlog.SLACK
TOOL = os.path.join(BUILDDIR, "tests", "helpers", "kube_tool")


@case
def restore_through_429s(t):
    w = World(t)
    w.fs_location(t.mkdir("store"))
    w.namespace(APP)
    w.sim.bulk({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "data": {"k": "dmFsdWU="}}, N, name="s-{i:04d}", namespace=APP)
    w.sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, 20,
               name="c-{i:04d}", namespace=APP)
    # default flags: no --qps, --burst, --restore-workers
    srv = w.server()
    w.create_backup("b1", {"includedNamespaces": [APP]})
    t.eq(w.wait_backup("b1", srv=srv)["status"]["phase"], "Completed", "backup phase")
    w.sim.ok("DELETE", "/api/v1/namespaces/%s" % APP)
    w.sim.ok("DELETE", "/_sim/requests")
    # The first 100 creates pass (a rule without an action), then 429s to a
    # share; creates take 20 ms each (a remote server), so a client that
    # did not hold the flow would still be sending during the Retry-After.
    secrets = "^/api/v1/namespaces/%s/secrets$" % APP
    w.sim.faults([{"method": "POST", "path": secrets, "count": 100},
                  {"method": "POST", "path": secrets, "status": 429, "retryAfter": RA,
                   "probability": 0.1, "seed": 7, "count": PUSHBACKS},
                  {"method": "POST", "path": secrets, "delay": 0.02}])
    w.create_restore("r1", "b1")
    r = w.wait_restore("r1", timeout=120, srv=srv)
    t.eq(r["status"]["phase"], "Completed", "restore phase: %s" % r.get("status"))
    t.eq(r["status"].get("errors", 0), 0, "restore errors")
    names = {o["metadata"]["name"] for o in
             w.sim.ok("GET", "/api/v1/namespaces/%s/secrets" % APP)["items"]}
    t.eq(len([n for n in names if n.startswith("s-")]), N, "Secrets restored")
    cms = w.sim.ok("GET", "/api/v1/namespaces/%s/configmaps" % APP)["items"]
    t.eq(len([o for o in cms if o["metadata"]["name"].startswith("c-")]), 20, "ConfigMaps restored")
    seen, problems = reqlog.retry_after(w.sim.requests())
    t.eq(seen, PUSHBACKS, "429s answered (the rule's count)")
    t.eq(problems, [], "requests sent before their Retry-After")


@case
def list_waits_retry_after(t):
    """A list refused with 429 (naming an APF priority level, as the real
    server does) is re-sent after Retry-After and counted as push-back."""
    w = World(t)
    w.namespace(APP)
    w.sim.bulk({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}}, 3,
               name="s-{i:04d}", namespace=APP)
    w.sim.faults({"method": "GET", "path": "^/api/v1/namespaces/%s/secrets$" % APP,
                  "status": 429, "retryAfter": RA, "count": 1,
                  "headers": {"X-Kubernetes-PF-PriorityLevel-UID": "pl-workload-low"}})
    r = subprocess.run([TOOL, "--kubeconfig", w.sim.kubeconfig, "--stats", "list", "core", "v1",
                        "secrets", APP], capture_output=True, text=True, timeout=60)
    t.eq(r.returncode, 0, "list through a 429: %s" % r.stderr)
    t.check("items=3" in r.stdout, "items listed: %s" % r.stdout)
    t.check("pushed_back=1 " in r.stderr, "429 counted: %s" % r.stderr)
    log = [e for e in w.sim.requests() if e["path"].endswith("/secrets")]
    t.eq([e["status"] for e in log], [429, 200], "statuses")
    t.check(log[1]["time"] >= log[0]["time"] + log[0]["duration"] + RA - SLACK,
            "re-sent %.3f s after the 429, Retry-After %d s" % (
                log[1]["time"] - log[0]["time"] - log[0]["duration"], RA))


@case
def open_watch_does_not_stall_its_flow_after_a_429(t):
    """A 429 halves the window of its flow (verb + resource); the server's
    watch of Backups, open for minutes, is of the same flow but must take
    no slot of it: the next list of Backups goes out at once and a new
    Backup is claimed. (It waited for the watch to end, 5 minutes, found
    by make chaos's api-429 trials.)"""
    w = World(t)
    w.fs_location(t.mkdir("store"))
    w.namespace(APP)
    srv = w.server()
    watch = "/apis/cairn.io/v1/namespaces/cairn-system/backups"
    wait_for(lambda: any(e["path"] == watch and "watch=1" in e["query"]
                         for e in w.sim.requests()), 30, "the server's watch of Backups")
    w.sim.faults({"method": "GET", "path": "^%s$" % watch, "query": "limit=", "status": 429,
                  "retryAfter": 0, "count": 1})
    wait_for(lambda: w.sim.ok("GET", "/_sim/faults")[0].get("hits") == 1, 30,
             "a list of Backups to be pushed back")
    w.create_backup("b1", {"includedNamespaces": [APP]})
    t.eq(w.wait_backup("b1", timeout=30, srv=srv)["status"]["phase"], "Completed", "backup phase")


main()

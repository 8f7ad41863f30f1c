#!/usr/bin/env python3
"""kubesim forgets by time as etcd compaction does: continue tokens older
than --continue-ttl get 410 Expired with the real message and an
inconsistent-continue token, watch history older than it is gone (410), and
a fault rule ends a watch with an ERROR event of any status."""
import base64
import json
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main  # noqa: E402

CM = "/api/v1/namespaces/default/configmaps"
EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a new "
           "list without the continue parameter, or use the continue token in this response to retrieve the "
           "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
           "that were created, modified, or deleted between the time the first chunk was returned and now may show "
           "up in the list.")


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


def make_cms(sim, n):
    sim.bulk({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}, n, name="cm-{i:03d}", namespace="default")


def watch_lines(sim, query, timeout=15):
    """A watch through urllib: the parsed event lines until the stream ends."""
    st, raw, _ = sim.request("GET", CM + "?watch=true&" + query, timeout=timeout)
    text = raw if isinstance(raw, str) else json.dumps(raw)
    return st, [json.loads(line) for line in text.splitlines() if line.strip()]


@case
def kubectl_chunked_get_hits_an_expired_token(t):
    need_kubectl(t)
    sim = t.kubesim(extra=["--continue-ttl", "2"])
    make_cms(sim, 30)
    t.eq(len(sim.kubectl("get", "cm", "--chunk-size=10", "-o", "name").stdout.split()), 30,
         "a quick chunked list is whole")
    # the second page asks 2.5 s after the first: etcd compacted the snapshot meanwhile
    sim.faults({"method": "GET", "path": "/configmaps$", "query": "continue=", "delay": 2.5, "count": 1})
    r = sim.kubectl("get", "cm", "--chunk-size=10", "-o", "name", check=False)
    t.check(r.returncode != 0 and "Error from server (Expired)" in r.stderr and EXPIRED in r.stderr.replace("\n", " "),
            "kubectl shows the real message: %s" % r.stderr)


@case
def expired_token_carries_an_inconsistent_continue(t):
    sim = t.kubesim(tls=False, extra=["--continue-ttl", "1"])
    make_cms(sim, 25)
    page = sim.ok("GET", CM + "?limit=10")
    tok = page["metadata"]["continue"]
    rv1 = page["metadata"]["resourceVersion"]
    page2 = sim.ok("GET", CM + "?limit=10&continue=" + urllib.parse.quote(tok))
    t.eq(page2["metadata"]["resourceVersion"], rv1, "a fresh token continues the same snapshot")
    time.sleep(1.3)
    st, body, _ = sim.get(CM + "?limit=10&continue=" + urllib.parse.quote(tok))
    t.eq((st, body["reason"], body["message"], body["code"]), (410, "Expired", EXPIRED, 410), "410 Expired")
    new = body["metadata"]["continue"]
    raw = json.loads(base64.urlsafe_b64decode(new + "=" * (-len(new) % 4)))
    t.eq(raw["rv"], -1, "the inconsistent token continues at the latest resourceVersion")
    sim.ok("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "zz-new"}})
    rest = sim.ok("GET", CM + "?limit=10&continue=" + urllib.parse.quote(new))
    t.eq([i["metadata"]["name"] for i in rest["items"]], ["cm-%03d" % i for i in range(10, 20)], "remainder")
    t.check(int(rest["metadata"]["resourceVersion"]) > int(rv1), "served at the latest resourceVersion")
    last = sim.ok("GET", CM + "?limit=10&continue=" + urllib.parse.quote(rest["metadata"]["continue"]))
    t.eq([i["metadata"]["name"] for i in last["items"]][-1], "zz-new", "objects created since show up")
    # a bad token is a 400
    st, body, _ = sim.get(CM + "?limit=10&continue=%%%")
    t.eq(st, 400, "garbage continue token")


@case
def watch_history_is_kept_by_time(t):
    sim = t.kubesim(tls=False, extra=["--continue-ttl", "1.5"])
    rv0 = sim.ok("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})["metadata"]["resourceVersion"]
    rv1 = sim.ok("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}})["metadata"]["resourceVersion"]
    st, evs = watch_lines(sim, "resourceVersion=%s&timeoutSeconds=1" % rv0)
    t.eq([(e["type"], e["object"]["metadata"]["name"]) for e in evs], [("ADDED", "b")],
         "within the window: the events after rv0")
    time.sleep(1.8)
    st, evs = watch_lines(sim, "resourceVersion=%s&timeoutSeconds=1" % rv0)
    t.eq(len(evs), 1, "one event: %s" % evs)
    t.eq((st, evs[0]["type"], evs[0]["object"]["code"], evs[0]["object"]["reason"]), (200, "ERROR", 410, "Expired"),
         "older than the window: 410 ERROR event")
    t.check(evs[0]["object"]["message"].startswith("too old resource version: %s (" % rv0), evs[0]["object"]["message"])
    # the latest resourceVersion stays watchable however long nothing was written
    st, evs = watch_lines(sim, "resourceVersion=%s&timeoutSeconds=1" % rv1)
    t.eq(evs, [], "watch from the latest resourceVersion")


@case
def watch_error_fault(t):
    need_kubectl(t)
    sim = t.kubesim(tls=False)
    sim.ok("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    sim.faults({"watchError": 500, "path": "configmaps", "count": 1})
    t0 = time.monotonic()
    st, evs = watch_lines(sim, "timeoutSeconds=10")
    t.eq([e["type"] for e in evs], ["ADDED", "ERROR"], "initial events, then the ERROR")
    t.eq((evs[1]["object"]["code"], evs[1]["object"]["reason"], evs[1]["object"]["message"]),
         (500, "InternalError", "Internal error occurred: etcdserver: request timed out"), "ERROR Status")
    t.check(time.monotonic() - t0 < 5, "the stream ended at the error")
    # a list is not a watch: the rule leaves it alone; the next watch is normal
    sim.faults({"watchError": 504, "reason": "Timeout", "message": "Timeout: Too large resource version: 999, current: 3",
                "watchErrorAfter": 0.5, "path": "configmaps", "count": 1})
    t.eq(sim.get(CM)[0], 200, "list untouched by a watchError rule")
    r = sim.kubectl("get", "cm", "-w", "--request-timeout=20s", check=False, timeout=30)
    # kubectl -w prints the ERROR event's Status as one more row (watchtools.UntilWithoutRetry)
    t.check("Timeout: Too large resource version: 999, current: 3" in r.stdout and "Failure" in r.stdout,
            "kubectl -w prints it: %s / %s" % (r.stdout, r.stderr))
    st, evs = watch_lines(sim, "timeoutSeconds=1")
    t.eq([e["type"] for e in evs], ["ADDED"], "rules used up: a normal watch")


main()

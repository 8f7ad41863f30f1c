"""How a backup with includedNamespaces lists (issues 17 and 27).

Names without patterns, or patterns that take few of the cluster's
namespaces, are listed namespace by namespace (test_backup_walk checks that
a one-namespace backup asks about nothing else). Patterns that take most of
the cluster's namespaces (3/4 or more) are listed once across the cluster,
and what is outside the plan's namespaces is left out. Both plans must give
the same tarball, byte for byte, and a backup killed under one plan and
resumed under the other (namespaces created meanwhile) must hold every
object exactly once.
"""
import os
import re
import tarfile

from bkworld import BK, NS, World, find_file
from cairntest import BIN, case, main, wait_for


def world(t, apps, per_app=20, big=0):
    """kubesim, an fs location, namespaces app-00.. (ConfigMaps of random
    text, `big` more in app-00) and `other` (not backed up); (World, root)."""
    w = World(t, sim=t.kubesim())
    root = t.mkdir("store")
    w.fs_location(root)
    w.namespace("other")
    add_apps(w, range(apps), per_app)
    if big:
        cm_bulk(w.sim, "app-00", big, start=per_app)
    cm_bulk(w.sim, "other", 30)
    return w, root


def cm_bulk(sim, ns, n, start=0):
    for c in range(start, start + n, 250):
        sim.ok("POST", "/_sim/bulk", {"items": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cm-%05d" % i, "namespace": ns},
             "data": {"payload": os.urandom(300).hex()}} for i in range(c, min(start + n, c + 250))]})


def add_apps(w, idx, per_app):
    for i in idx:
        w.namespace("app-%02d" % i)
        if per_app:
            cm_bulk(w.sim, "app-%02d" % i, per_app)


def tar_names(root, name):
    with tarfile.open(find_file(root, name + ".tar.gz"), "r:gz") as tf:
        return tf.getnames()


def want_cms(sim, pattern=r"^app-"):
    """Legacy tarball paths of the ConfigMaps kubesim holds in namespaces matching pattern."""
    items = sim.ok("GET", "/api/v1/configmaps")["items"]
    return sorted("resources/configmaps/namespaces/%s/%s.json" % (
        o["metadata"]["namespace"], o["metadata"]["name"]) for o in items
        if re.match(pattern, o["metadata"]["namespace"]))


def check_items(t, root, name, sim):
    names = tar_names(root, name)
    t.eq(len(set(names)), len(names), "%s: every entry once" % name)
    got = set(n for n in names if n.startswith("resources/configmaps/namespaces/"))
    want = set(want_cms(sim))
    t.eq((len(got), sorted(want - got)[:5], sorted(got - want)[:5]), (len(want), [], []),
         "%s: (ConfigMaps, first missing, first not of app-*) in the tarball" % name)
    t.check("resources/namespaces/cluster/app-00.json" in names, "%s: Namespace app-00" % name)
    t.check("resources/namespaces/cluster/other.json" not in names, "%s: Namespace other" % name)


def cm_lists(sim, seq):
    """(cluster-wide, per-namespace) ConfigMap list requests after seq."""
    qs = [q for q in sim.requests() if q["seq"] > seq and q["method"] == "GET" and
          (q.get("userAgent") or "").startswith("cairn")]
    wide = [q for q in qs if q["path"] == "/api/v1/configmaps"]
    per = [q for q in qs if re.match(r"^/api/v1/namespaces/[^/]+/configmaps$", q["path"])]
    return wide, per


def n_namespaces(sim):
    return len(sim.ok("GET", "/api/v1/namespaces")["items"])


def create_backup(w, name, spec, start=None):
    w.sim.ok("POST", BK, {"apiVersion": "cairn.io/v1", "kind": "Backup",
                          "metadata": {"name": name, "namespace": NS}, "spec": spec})
    if start:
        w.sim.ok("PATCH", "%s/%s/status" % (BK, name), {"status": {"startTimestamp": start}},
                 content_type="application/merge-patch+json")


@case
def most_namespaces_listed_across_the_cluster(t):
    """20 of 26 namespaces match app-*: each resource is listed once across
    the cluster, namespace `other` left out; with 10 more namespaces (20 of
    36) the same backup lists namespace by namespace, and the two tarballs
    are the same bytes."""
    w, root = world(t, 20)
    t.eq(n_namespaces(w.sim), 26, "namespaces in the cluster")
    spec = {"includedNamespaces": ["app-*"]}
    start = "2026-01-02T03:04:05Z"
    data = {}
    for name in ("wide", "per-ns"):
        if name == "per-ns":
            for i in range(10):
                w.namespace("zz-%d" % i)
        seq = w.sim.requests()[-1]["seq"]
        # the startTimestamp (the entries' mtime) is set before a server claims it
        create_backup(w, name, spec, start)
        srv = w.server("s-" + name)
        b = w.wait_backup(name, srv=srv, timeout=120)
        srv.stop()
        t.eq(b["status"]["phase"], "Completed", "%s: phase" % name)
        check_items(t, root, name, w.sim)
        wide, per = cm_lists(w.sim, seq)
        if name == "wide":
            t.check(wide, "wide: no ConfigMap list across the cluster")
            t.eq([q["path"] for q in per], [], "wide: per-namespace ConfigMap lists")
        else:
            t.eq([q["path"] for q in wide], [], "per-ns: ConfigMap lists across the cluster")
            t.eq(len(per), 20, "per-ns: ConfigMap lists, one per app namespace")
        with open(find_file(root, name + ".tar.gz"), "rb") as f:
            data[name] = f.read()
    t.check(data["wide"] == data["per-ns"], "the tarballs of the two plans differ (%d and %d bytes)"
            % (len(data["wide"]), len(data["per-ns"])))


def server_argv(w, part, journal):
    return [BIN, "server", "--kubeconfig", w.sim.kubeconfig, "--namespace", NS, "--server-id", "s1",
            "--journal", journal, "--part-size", str(part), "--retry-period", "200ms",
            "--log-level", "info"]


def crash_and_resume(t, w, root, name, flip, want_wide):
    """A backup of app-* killed (kill -9) after its 12th part, flip() changes
    the plan, a restart with the same journal finishes it."""
    part = 32 << 10
    journal = t.path("j-%s.db" % name)
    s1 = t.spawn(server_argv(w, part, journal), name="s1-" + name,
                 env={"CAIRN_FAULT": "backup.after-part@12"})
    create_backup(w, name, {"includedNamespaces": ["app-*"]})
    wait_for(lambda: not s1.alive(), 120, "the server to die after part 12", interval=0.05)
    t.check("fault point backup.after-part" in s1.output(), "died elsewhere: %s" % s1.output()[-2000:])
    cp = w.backup(name)["status"]["checkpoint"]
    tok = cp.get("listContinue", "")
    t.check(tok, "%s: no continue token in the checkpoint (the crash came before a 2nd page): %s"
            % (name, cp))
    t.eq(tok.startswith("~"), want_wide, "%s: the token is of a list across namespaces" % name)
    flip()
    seq = w.sim.requests()[-1]["seq"]
    s2 = t.spawn(server_argv(w, part, journal), name="s2-" + name)
    b = w.wait_backup(name, srv=s2, timeout=120)
    t.eq(b["status"]["phase"], "Completed", "%s: phase" % name)
    check_items(t, root, name, w.sim)
    wide, per = cm_lists(w.sim, seq)
    t.check(per if want_wide else wide, "%s: the resumed run did not change plan" % name)
    s2.stop()


@case
def resumed_under_the_other_plan(t):
    """Killed while listing across the cluster, resumed namespace by
    namespace (10 namespaces created meanwhile), and the other way round
    (killed per namespace, 40 matching namespaces created meanwhile): the
    checkpoint's continue token is of the other kind of list, so the
    resumed run lists from the start and skips what is stored; every
    ConfigMap of app-* is in the tarball once."""
    w, root = world(t, 20, per_app=5, big=1500)

    def more_others():
        for i in range(10):
            w.namespace("zz-%d" % i)
    crash_and_resume(t, w, root, "wide-then-per-ns", more_others, True)

    # now 20 of 36 namespaces match: per namespace; 40 more app-* make 60 of 76
    def more_apps():
        add_apps(w, range(20, 60), 1)
    crash_and_resume(t, w, root, "per-ns-then-wide", more_apps, False)


main()

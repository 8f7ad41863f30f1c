"""docs/grafana-dashboard.json: a Grafana dashboard that imports and whose
every query asks for metrics and labels cairn serves.

The metric table (base/metrics.def) is what /metrics serves (checked
against a served page); each panel's PromQL may name only those metrics
(with _bucket/_sum/_count for histograms) and group or filter only by
their labels (plus le, and instance/job, which Prometheus adds); panels
fit Grafana's 24-column grid without overlapping; ids are unique; the
data source and the schedule selector are template variables.
"""
import json
import os
import re

from cairntest import SRCDIR, case, main
from webcheck import scrape, start_demo

DASH = os.path.join(SRCDIR, "docs", "grafana-dashboard.json")
DEF = os.path.join(SRCDIR, "base", "metrics.def")
PROM_LABELS = {"instance", "job"}


def metric_table():
    """{full name: (type, {label names})} from base/metrics.def."""
    out = {}
    with open(DEF) as f:
        text = f.read()
    for m in re.finditer(r'^METRIC\((\w+),\s*"(\w+)",\s*(\w+),\s*"([^"]*)"', text, re.M):
        labels = {x for x in m.group(4).split(",") if x}
        out["cairn_" + m.group(2)] = (m.group(3), labels)
    return out


@case
def dashboard_queries_only_what_cairn_serves(t):
    table = metric_table()
    t.check(len(table) > 30, "metrics.def parsed: %d metrics" % len(table))
    demo, port = start_demo(t)
    served = set(scrape(port))
    t.eq(sorted(set(table) - served), [], "metrics.def entries missing from /metrics")
    t.eq(sorted(n for n in served - set(table) if n.startswith("cairn_")), [],
         "/metrics families not in metrics.def")

    with open(DASH) as f:
        d = json.load(f)
    t.eq(d.get("uid"), "cairn-overview", "dashboard uid")
    names = {v["name"] for v in d["templating"]["list"]}
    t.check({"datasource", "schedule"} <= names, "template variables: %s" % names)
    ids, boxes, used = set(), [], set()
    for p in d["panels"]:
        t.check(p["id"] not in ids, "panel id %s twice" % p["id"])
        ids.add(p["id"])
        g = p["gridPos"]
        t.check(g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, "panel %r outside the grid" % p["title"])
        for b in boxes:
            overlap = (g["x"] < b["x"] + b["w"] and b["x"] < g["x"] + g["w"] and
                       g["y"] < b["y"] + b["h"] and b["y"] < g["y"] + g["h"])
            t.check(not overlap, "panel %r overlaps another" % p["title"])
        boxes.append(g)
        if p["type"] == "row":
            continue
        t.check(p["targets"], "panel %r has no query" % p["title"])
        for q in p["targets"]:
            expr = q["expr"]
            metrics = set(re.findall(r"\bcairn_\w+", expr))
            t.check(metrics, "query without a cairn metric: %r" % expr)
            labels = set(PROM_LABELS)
            for m in metrics:
                base = re.sub(r"_(bucket|sum|count)$", "", m)
                if m not in table and not (base in table and table[base][0] == "HISTOGRAM"):
                    t.check(False, "%r asks for %s, which cairn does not serve" % (p["title"], m))
                    continue
                typ, ls = table[m] if m in table else table[base]
                labels |= ls | ({"le"} if m.endswith("_bucket") else set())
                used.add(base if base in table else m)
            for grp in re.findall(r"\bby \(([^)]*)\)", expr):
                for lab in (x.strip() for x in grp.split(",")):
                    t.check(lab in labels, "%r groups by %r, not a label of %s" % (
                        p["title"], lab, sorted(metrics)))
            for lab in re.findall(r"(\w+)\s*=~?\s*\"", expr):
                t.check(lab in labels, "%r filters on %r, not a label of %s" % (
                    p["title"], lab, sorted(metrics)))
    # The metrics users ask about first are on the dashboard.
    for want in ("cairn_backup_success_total", "cairn_backup_failure_total",
                 "cairn_backup_duration_seconds", "cairn_backup_tarball_size_bytes",
                 "cairn_backup_last_successful_timestamp", "cairn_backup_items_total",
                 "cairn_restore_success_total", "cairn_servers_seen"):
        t.check(want in used, "%s is on no panel" % want)


main()

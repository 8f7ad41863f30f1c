"""Resources a real cluster serves that are not plain stored objects.

- `componentstatuses` (core v1, get/list only): the legacy component health
  check (pkg/registry/core/componentstatus/rest.go), three Healthy components.
- `metrics.k8s.io/v1beta1` `pods` and `nodes` (get/list only): what
  metrics-server answers (sigs.k8s.io/metrics-server pkg/api/pod.go, node.go),
  computed from the Pods and Nodes kubesim holds, with made-up but stable
  usage figures. No resourceVersion, uid or paging, as metrics-server.
- `events.k8s.io/v1` `events`: the same stored objects as core `events`,
  converted field by field as pkg/apis/events/v1/conversion.go does
  (regarding <-> involvedObject, note <-> message, deprecated* <-> source,
  firstTimestamp, lastTimestamp, count, reportingController <->
  reportingComponent)."""

import hashlib
import time

from ks_core import ApiError, not_found, loads
from ks_select import label_match, field_match

CS_ITEMS = [
    ("controller-manager", "ok"),
    ("etcd-0", '{"health":"true","reason":""}'),
    ("scheduler", "ok"),
]


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _usage(key, cpu_lo, cpu_hi, mem_lo_ki, mem_hi_ki):
    h = int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big")
    cpu = cpu_lo + h % (cpu_hi - cpu_lo)
    mem = mem_lo_ki + (h >> 20) % (mem_hi_ki - mem_lo_ki)
    return {"cpu": "%dn" % cpu, "memory": "%dKi" % mem}


def _pod_metrics(pod):
    md = pod["metadata"]
    m = {"name": md["name"], "namespace": md["namespace"], "creationTimestamp": _now()}
    if md.get("labels"):
        m["labels"] = md["labels"]
    containers = [{"name": c.get("name", ""), "usage": _usage(md["namespace"] + "/" + md["name"] + "/" + c.get("name", ""),
                                                             100000, 50000000, 2048, 262144)}
                  for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    return {"metadata": m, "timestamp": _now(), "window": "15.012s", "containers": containers}


def _node_metrics(node):
    md = node["metadata"]
    m = {"name": md["name"], "creationTimestamp": _now()}
    if md.get("labels"):
        m["labels"] = md["labels"]
    return {"metadata": m, "timestamp": _now(), "window": "20.031s",
            "usage": _usage(md["name"], 50000000, 900000000, 524288, 4194304)}


def _metrics_source(sim, rt, ns):
    """-> [(namespace, name, labels, object dict)] of the pods/nodes metrics-server reports.

    metrics-server reports pods the kubelet runs; kubesim has no kubelet, so
    every pod that has not finished (phase other than Succeeded/Failed)."""
    src = ("", "pods") if rt.virtual == "podmetrics" else ("", "nodes")
    with sim.lock:
        st = sim.stores[src]
        lo, hi = st.ns_range(ns if rt.namespaced else None)
        entries = [(st.keys[i], st.objs[st.keys[i]]) for i in range(lo, hi)]
    out = []
    for key, (data, labels) in entries:
        o = loads(data)
        if rt.virtual == "podmetrics":
            if (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            out.append((key[0], key[1], labels, _pod_metrics(o)))
        else:
            out.append((None, key[1], labels, _node_metrics(o)))
    return out


def _components():
    return [{"metadata": {"name": n, "creationTimestamp": None},
             "conditions": [{"type": "Healthy", "status": "True", "message": msg}]} for n, msg in CS_ITEMS]


def virtual_list(sim, rt, ns, lsel, fsel):
    """-> list object (dict) of a virtual resource."""
    items = []
    if rt.virtual == "componentstatuses":
        for o in _components():
            name = o["metadata"]["name"]
            if fsel and not field_match(fsel, None, name, lambda: o):
                continue
            if lsel and not label_match(lsel, None):
                continue
            items.append(o)
    else:
        for ins, name, labels, o in _metrics_source(sim, rt, ns):
            if lsel and not label_match(lsel, labels):
                continue
            if fsel and not field_match(fsel, ins, name, lambda: o):
                continue
            items.append(o)
    return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": {}, "items": items}


def virtual_get(sim, rt, ns, name):
    if rt.virtual == "componentstatuses":
        for o in _components():
            if o["metadata"]["name"] == name:
                return dict({"kind": rt.kind, "apiVersion": rt.api_version}, **o)
        raise not_found(rt, name)
    src = ("", "pods") if rt.virtual == "podmetrics" else ("", "nodes")
    with sim.lock:
        e = sim.stores[src].objs.get((ns if rt.namespaced else "", name))
    o = loads(e[0]) if e else None
    if o is None or (rt.virtual == "podmetrics" and (o.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
        raise not_found(rt, name)
    m = _pod_metrics(o) if rt.virtual == "podmetrics" else _node_metrics(o)
    return dict({"kind": rt.kind, "apiVersion": rt.api_version}, **m)


# ------------------------------------------------------------------ events.k8s.io
# events.k8s.io/v1 Event field <- core/v1 Event field, in the events/v1 struct's order
_EV_FIELDS = [("eventTime", "eventTime"), ("series", "series"), ("reportingController", "reportingComponent"),
              ("reportingInstance", "reportingInstance"), ("action", "action"), ("reason", "reason"),
              ("regarding", "involvedObject"), ("related", "related"), ("note", "message"), ("type", "type"),
              ("deprecatedSource", "source"), ("deprecatedFirstTimestamp", "firstTimestamp"),
              ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count")]
# fields the Go structs always print (no omitempty, or structs)
_EV_ALWAYS = {"eventTime": None, "regarding": {}, "deprecatedSource": {}, "deprecatedFirstTimestamp": None,
              "deprecatedLastTimestamp": None}


def core_to_events(o, api_version="events.k8s.io/v1"):
    out = {"kind": "Event", "apiVersion": api_version, "metadata": o.get("metadata", {})}
    for ev, core in _EV_FIELDS:
        v = o.get(core)
        if v in (None, "", 0, {}) and ev not in _EV_ALWAYS:
            continue
        series = v
        if ev == "series" and isinstance(v, dict):
            series = {k: v[k] for k in ("count", "lastObservedTime") if k in v}
        out[ev] = series if v is not None else _EV_ALWAYS.get(ev)
    return out


def events_to_core(o):
    """An events.k8s.io/v1 Event (as a client sent it) -> core/v1 fields."""
    if not isinstance(o, dict):
        raise ApiError(400, "BadRequest", "the body of the request was in an unknown format - accepted media types "
                                          "include: application/json, application/yaml")
    out = {"apiVersion": "v1", "kind": "Event"}
    if "metadata" in o:
        out["metadata"] = o["metadata"]
    for ev, core in _EV_FIELDS:
        if ev in o and o[ev] is not None:
            out[core] = o[ev]
    return out

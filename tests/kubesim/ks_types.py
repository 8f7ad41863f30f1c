"""Resource types: the built-in table (one line per type), CRD-defined types,
Table (printer column) conversion."""

import calendar
import json
import re
import time

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUB_VERBS = ["get", "patch", "update"]

# flags: s = status subresource, g = metadata.generation maintained,
#        r = PUT requires resourceVersion (no unconditional update),
#        c = PUT on a missing object creates it, a = category "all", S = scale subresource,
#        n = no deletecollection verb (namespaces), k = create keeps .status (nodes)
# group, version, plural, Kind, namespaced, shortNames, flags, extra field selectors
BUILTINS = [
    ("", "v1", "namespaces", "Namespace", False, "ns", "sn", "status.phase"),
    ("", "v1", "nodes", "Node", False, "no", "sk", "spec.unschedulable"),
    ("", "v1", "configmaps", "ConfigMap", True, "cm", "", ""),
    ("", "v1", "secrets", "Secret", True, "", "", "type"),
    ("", "v1", "services", "Service", True, "svc", "sa", "spec.clusterIP,spec.type"),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, "sa", "", ""),
    ("", "v1", "pods", "Pod", True, "po", "sa", "spec.nodeName,spec.restartPolicy,spec.schedulerName,spec.serviceAccountName,status.phase,status.podIP,status.nominatedNodeName"),
    ("", "v1", "persistentvolumes", "PersistentVolume", False, "pv", "s", ""),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "pvc", "s", ""),
    ("", "v1", "events", "Event", True, "ev", "c", "involvedObject.kind,involvedObject.namespace,involvedObject.name,involvedObject.uid,involvedObject.apiVersion,involvedObject.resourceVersion,involvedObject.fieldPath,reason,reportingComponent,source,type"),
    ("", "v1", "endpoints", "Endpoints", True, "ep", "c", ""),
    ("", "v1", "limitranges", "LimitRange", True, "limits", "c", ""),
    ("", "v1", "resourcequotas", "ResourceQuota", True, "quota", "s", ""),
    ("apps", "v1", "deployments", "Deployment", True, "deploy", "sgaS", ""),
    ("apps", "v1", "replicasets", "ReplicaSet", True, "rs", "sgaS", ""),
    ("apps", "v1", "statefulsets", "StatefulSet", True, "sts", "sgaS", ""),
    ("apps", "v1", "daemonsets", "DaemonSet", True, "ds", "sga", ""),
    ("batch", "v1", "jobs", "Job", True, "", "sga", "status.successful"),
    ("batch", "v1", "cronjobs", "CronJob", True, "cj", "sga", ""),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, "", "", ""),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, "", "", ""),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, "", "", ""),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, "", "", ""),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, "sc", "", ""),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, "", "rc", ""),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", True, "ing", "sg", ""),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, "netpol", "g", ""),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "pdb", "sg", ""),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, "pc", "", ""),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, "hpa", "s", ""),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, "crd,crds", "sg", ""),
]


class RType:
    __slots__ = ("group", "version", "plural", "singular", "kind", "list_kind", "namespaced",
                 "short_names", "categories", "has_status", "has_generation", "requires_rv",
                 "create_on_update", "custom", "columns", "field_selectors", "crd_name",
                 "versions", "scale", "verbs", "keep_status", "virtual", "alias", "aggregated",
                 "list_prefix")

    def __init__(self, group, version, plural, kind, namespaced, short_names=(), flags="",
                 field_selectors=(), custom=False, singular=None, list_kind=None,
                 categories=None, columns=None, crd_name=None, versions=None, scale=None,
                 verbs=None, virtual=None, alias=None, aggregated=False):
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.singular = singular or kind.lower()
        self.list_kind = list_kind or kind + "List"
        self.namespaced = namespaced
        self.short_names = list(short_names)
        self.categories = categories if categories is not None else (["all"] if "a" in flags else [])
        self.has_status = "s" in flags
        self.has_generation = "g" in flags or custom
        self.requires_rv = "r" in flags or custom
        self.create_on_update = "c" in flags
        self.custom = custom
        self.columns = columns
        self.field_selectors = set(field_selectors)
        self.crd_name = crd_name
        self.versions = versions or [version]
        # (specReplicasPath, statusReplicasPath, labelSelectorPath) or None
        self.scale = scale if scale is not None else (
            (".spec.replicas", ".status.replicas", None) if "S" in flags else None)
        self.verbs = list(verbs) if verbs is not None else (
            [v for v in ALL_VERBS if v != "deletecollection"] if "n" in flags else ALL_VERBS)
        self.keep_status = "k" in flags
        # virtual: answered from other objects (ks_virtual), never stored
        self.virtual = virtual
        # alias: the same stored objects as another resource, converted (ks_virtual)
        self.alias = alias
        # aggregated: served by an aggregated API server (kube-aggregator proxies it)
        self.aggregated = aggregated
        # what a stored object starts with: typed list items go out without it
        self.list_prefix = ('{"apiVersion":%s,"kind":%s,' % (json.dumps(self.api_version),
                                                             json.dumps(kind))).encode()

    @property
    def rkey(self):
        return (self.group, self.plural)

    @property
    def api_version(self):
        return self.group + "/" + self.version if self.group else self.version

    @property
    def qualified(self):
        """configmaps / backups.example.io, as in error messages."""
        return self.plural + "." + self.group if self.group else self.plural

    @property
    def qualified_kind(self):
        return self.kind + "." + self.group if self.group else self.kind

    def discovery(self, connect=()):
        """Legacy discovery entries (APIResource) of this resource and its
        subresources; connect: extra (subresource, kind, verbs) registered by
        plugins (pods/exec)."""
        out = [{"name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
                "kind": self.kind, "verbs": self.verbs}]
        if self.short_names:
            out[0]["shortNames"] = self.short_names
        if self.categories:
            out[0]["categories"] = self.categories
        if self.has_status:
            out.append({"name": self.plural + "/status", "singularName": "", "namespaced": self.namespaced,
                        "kind": self.kind, "verbs": SUB_VERBS})
        if self.scale:
            out.append({"name": self.plural + "/scale", "singularName": "", "namespaced": self.namespaced,
                        "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": SUB_VERBS})
        for sub, kind, verbs in connect:
            out.append({"name": self.plural + "/" + sub, "singularName": "", "namespaced": self.namespaced,
                        "kind": kind, "verbs": list(verbs)})
        out.sort(key=lambda r: r["name"])
        return out


def builtin_types():
    out = []
    for g, v, p, k, ns, short, flags, fs in BUILTINS:
        out.append(RType(g, v, p, k, ns, [s for s in short.split(",") if s], flags,
                         [f for f in fs.split(",") if f]))
    # Resources real clusters serve that are not plain stored objects (ks_virtual):
    # list-only types and the same events under a second group.
    out.append(RType("", "v1", "componentstatuses", "ComponentStatus", False, ["cs"], verbs=["get", "list"],
                     virtual="componentstatuses"))
    out.append(RType("events.k8s.io", "v1", "events", "Event", True, ["ev"], alias=("", "events")))
    out.append(RType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True, verbs=["get", "list"],
                     virtual="podmetrics", aggregated=True))
    out.append(RType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, verbs=["get", "list"],
                     virtual="nodemetrics", aggregated=True))
    return out


# ------------------------------------------------------------------ time
_now = (0, "")


def now_rfc3339():
    """The current second in RFC 3339 UTC, formatted once per second."""
    global _now
    sec = int(time.time())
    if _now[0] != sec:
        _now = (sec, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec)))
    return _now[1]


_TS_RE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


def parse_ts(s):
    """RFC 3339 -> (epoch seconds int, microseconds) or None."""
    if not isinstance(s, str):
        return None
    m = _TS_RE.match(s)
    if not m:
        return None
    y, mo, d, h, mi, se = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7)
    us = int((frac[1:] + "000000")[:6]) if frac else 0
    try:
        secs = calendar.timegm((y, mo, d, h, mi, se, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    tz = m.group(8)
    if tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        secs -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return secs, us


def format_micro(secs, us):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + ".%06dZ" % us


def human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = s // 3600
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    if h < 192:
        return "%dd%dh" % (h // 24, h % 24) if h % 24 else "%dd" % (h // 24)
    if h < 24 * 365 * 2:
        return "%dd" % (h // 24)
    if h < 24 * 365 * 8:
        y = h // (24 * 365)
        dd = (h // 24) % 365
        return "%dy%dd" % (y, dd) if dd else "%dy" % y
    return "%dy" % (h // (24 * 365))


def age(ts):
    p = parse_ts(ts)
    if p is None:
        return "<unknown>"
    return human_duration(time.time() - p[0])


# -------------------------------------------------------------- jsonpath
_SEG_RE = re.compile(r"""\.([A-Za-z0-9_\-$/]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*["']([^"']*)["']\)\]|\[['"]([^'"]+)['"]\]""")


def jsonpath(obj, path):
    """Simple JSONPath subset used by printer columns: .a.b, [0], [*], ['k.x'], [?(@.f=="v")].
    Returns a list of results."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    cur = [obj]
    pos = 0
    while pos < len(path):
        m = _SEG_RE.match(path, pos)
        if not m:
            return []
        pos = m.end()
        nxt = []
        for c in cur:
            if m.group(1) is not None or m.group(5) is not None:
                k = m.group(1) if m.group(1) is not None else m.group(5)
                if isinstance(c, dict) and k in c:
                    nxt.append(c[k])
            elif m.group(2) is not None:
                if isinstance(c, list):
                    if m.group(2) == "*":
                        nxt.extend(c)
                    elif int(m.group(2)) < len(c):
                        nxt.append(c[int(m.group(2))])
            else:
                if isinstance(c, list):
                    for e in c:
                        v = e
                        for p in m.group(3).split("."):
                            v = v.get(p) if isinstance(v, dict) else None
                        if v is not None and str(v) == m.group(4):
                            nxt.append(e)
        cur = nxt
    return cur


def _cell(values, typ):
    if not values:
        return None
    v = values[0] if len(values) == 1 else values
    if typ == "date":
        return age(v) if isinstance(v, str) else None
    if typ == "integer":
        return v if isinstance(v, int) and not isinstance(v, bool) else (None if isinstance(v, (dict, list)) else v)
    if typ == "number":
        return v if isinstance(v, (int, float)) else v
    if typ == "boolean":
        return v if isinstance(v, bool) else v
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v) if not isinstance(v, str) else v


# -------------------------------------------------- built-in printer columns
def _ready_containers(o):
    cs = (o.get("status") or {}).get("containerStatuses") or []
    n = len((o.get("spec") or {}).get("containers") or [])
    return "%d/%d" % (sum(1 for c in cs if c.get("ready")), n)


def _restarts(o):
    return sum(int(c.get("restartCount") or 0) for c in (o.get("status") or {}).get("containerStatuses") or [])


def _g(o, *path):
    for p in path:
        o = o.get(p) if isinstance(o, dict) else None
    return o


BUILTIN_COLUMNS = {
    "ConfigMap": [("Data", "integer", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}))],
    "Secret": [("Type", "string", lambda o: o.get("type", "")),
               ("Data", "integer", lambda o: len(o.get("data") or {}))],
    "Namespace": [("Status", "string", lambda o: _g(o, "status", "phase") or "")],
    "Pod": [("Ready", "string", _ready_containers),
            ("Status", "string", lambda o: _g(o, "status", "phase") or ""),
            ("Restarts", "string", lambda o: str(_restarts(o)))],
    "Deployment": [("Ready", "string", lambda o: "%d/%d" % (_g(o, "status", "readyReplicas") or 0, _g(o, "spec", "replicas") if _g(o, "spec", "replicas") is not None else 1)),
                   ("Up-to-date", "integer", lambda o: _g(o, "status", "updatedReplicas") or 0),
                   ("Available", "integer", lambda o: _g(o, "status", "availableReplicas") or 0)],
    "Service": [("Type", "string", lambda o: _g(o, "spec", "type") or "ClusterIP"),
                ("Cluster-IP", "string", lambda o: _g(o, "spec", "clusterIP") or "<none>")],
    "Lease": [("Holder", "string", lambda o: _g(o, "spec", "holderIdentity") or "")],
    "PersistentVolumeClaim": [("Status", "string", lambda o: _g(o, "status", "phase") or "")],
    "PersistentVolume": [("Status", "string", lambda o: _g(o, "status", "phase") or "")],
    "StorageClass": [("Provisioner", "string", lambda o: o.get("provisioner", ""))],
}


def _event_obj(o):
    ref = o.get("involvedObject") or o.get("regarding") or {}
    return "%s/%s" % ((ref.get("kind") or "").lower(), ref.get("name") or "")


def _event_seen(o):
    for f in ("lastTimestamp", "deprecatedLastTimestamp", "eventTime", "firstTimestamp", "deprecatedFirstTimestamp"):
        if o.get(f):
            return age(o[f])
    return age(_g(o, "metadata", "creationTimestamp"))


def _col(name, typ, fn, priority=0):
    return ({"name": name, "type": typ, "format": "", "description": "", "priority": priority}, fn)


# Kinds whose server-side table has its own columns (pkg/printers/internalversion,
# metrics-server): no generic Name/Age pair.
SPECIAL_TABLES = {
    "Event": [_col("Last Seen", "string", _event_seen),
              _col("Type", "string", lambda o: o.get("type", "")),
              _col("Reason", "string", lambda o: o.get("reason", "")),
              _col("Object", "string", _event_obj),
              _col("Message", "string", lambda o: o.get("message", o.get("note", "")))],
    "ComponentStatus": [({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
                         lambda o: _g(o, "metadata", "name")),
                        _col("Status", "string", lambda o: "Healthy" if any(
                            c.get("type") == "Healthy" and c.get("status") == "True" for c in o.get("conditions") or [])
                            else "Unhealthy"),
                        _col("Message", "string", lambda o: next((c.get("message", "") for c in o.get("conditions") or []), "")),
                        _col("Error", "string", lambda o: next((c.get("error", "") for c in o.get("conditions") or []), ""))],
    "PodMetrics": [({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
                    lambda o: _g(o, "metadata", "name")),
                   _col("CPU", "string", lambda o: ",".join((c.get("usage") or {}).get("cpu", "") for c in o.get("containers") or [])),
                   _col("Memory", "string", lambda o: ",".join((c.get("usage") or {}).get("memory", "") for c in o.get("containers") or [])),
                   _col("Window", "string", lambda o: o.get("window", ""))],
    "NodeMetrics": [({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
                     lambda o: _g(o, "metadata", "name")),
                    _col("CPU", "string", lambda o: _g(o, "usage", "cpu") or ""),
                    _col("Memory", "string", lambda o: _g(o, "usage", "memory") or ""),
                    _col("Window", "string", lambda o: o.get("window", ""))],
}


def table_columns(rt):
    """-> list of (definition dict, cell function(obj))."""
    if not rt.custom and rt.kind in SPECIAL_TABLES:
        return SPECIAL_TABLES[rt.kind]
    cols = [({"name": "Name", "type": "string", "format": "name",
              "description": "Name must be unique within a namespace.", "priority": 0},
             lambda o: _g(o, "metadata", "name"))]
    if rt.custom:
        pcs = rt.columns
        if not pcs:
            pcs = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        for pc in pcs:
            d = {"name": pc.get("name", ""), "type": pc.get("type", "string"), "format": pc.get("format", ""),
                 "description": pc.get("description", ""), "priority": int(pc.get("priority", 0) or 0)}
            jp, typ = pc.get("jsonPath", ""), d["type"]
            cols.append((d, (lambda jp, typ: lambda o: _cell(jsonpath(o, jp), typ))(jp, typ)))
        return cols
    if rt.kind == "CustomResourceDefinition":
        cols.append(({"name": "Created At", "type": "date", "format": "", "description": "", "priority": 0},
                     lambda o: _g(o, "metadata", "creationTimestamp")))
        return cols
    for name, typ, fn in BUILTIN_COLUMNS.get(rt.kind, []):
        cols.append(({"name": name, "type": typ, "format": "", "description": "", "priority": 0}, fn))
    cols.append(({"name": "Age", "type": "string", "format": "",
                  "description": "CreationTimestamp is a timestamp representing the server time when this object was created.",
                  "priority": 0}, lambda o: age(_g(o, "metadata", "creationTimestamp"))))
    return cols


def partial_meta(o):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata", {})}


def make_table(rt, objs, list_meta, include="Metadata", with_columns=True):
    cols = table_columns(rt)
    rows = []
    for o in objs:
        row = {"cells": [fn(o) for _, fn in cols]}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = partial_meta(o)
        rows.append(row)
    t = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
         "columnDefinitions": [d for d, _ in cols] if with_columns else None, "rows": rows}
    return t

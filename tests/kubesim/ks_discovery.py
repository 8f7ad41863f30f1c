"""Discovery documents: legacy (/api, /apis, /apis/G, /api/v1, /apis/G/V) and
aggregated (apidiscovery.k8s.io/v2 and v2beta1 at /api and /apis), built from
the one resource table so both always say the same thing.

Real server code: k8s.io/apiserver pkg/endpoints/discovery (legacy),
pkg/endpoints/discovery/aggregated (v2; resources sorted by name, versions by
kube-aware version priority), kube-aggregator handler_discovery.go (an
APIService whose backend cannot be reached stays in the document as a
version with no resources and `freshness: Stale`; its legacy
/apis/G/V answers 503), apiextensions-apiserver (CRD groups and versions)."""

from ks_core import version_key

AGG_TYPES = {"v2": "apidiscovery.k8s.io/v2", "v2beta1": "apidiscovery.k8s.io/v2beta1"}


def aggregated_wanted(accept):
    """The apidiscovery version the Accept header asks for first, or None
    (plain JSON): kubectl sends v2, then v2beta1, then application/json."""
    for part in (accept or "").split(","):
        part = part.strip()
        if "as=APIGroupDiscoveryList" not in part or "g=apidiscovery.k8s.io" not in part:
            if part.split(";")[0].strip() in ("application/json", "*/*", "application/*"):
                return None
            continue
        for p in part.split(";"):
            p = p.strip()
            if p.startswith("v=") and p[2:] in AGG_TYPES:
                return p[2:]
    return None


def content_type(ver):
    return "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList" % ver


def group_versions(sim):
    """-> [(group, [versions, preferred first])] in the order a real server lists
    them: built-in groups (by their APIService priority, which the built-in
    table follows), CRD groups by name, then aggregated API groups."""
    with sim.lock:
        rts = list(sim.types.values())
    builtin, crd, agg = {}, {}, {}
    for rt in rts:
        d = crd if rt.custom else agg if rt.aggregated else builtin
        vs = d.setdefault(rt.group, [])
        if rt.version not in vs:
            vs.append(rt.version)
    out = []
    for d, ordered in ((builtin, list(builtin)), (crd, sorted(crd)), (agg, sorted(agg))):
        for g in ordered:
            out.append((g, sorted(d[g], key=version_key, reverse=True)))
    return out


def _rts(sim, g, v):
    with sim.lock:
        return sorted((rt for (gg, vv, p), rt in sim.types.items() if gg == g and vv == v), key=lambda r: r.plural)


def _connect_of(connect, rt):
    return [(sub, c["kind"], c["verbs"]) for (g, p, sub), c in sorted(connect.items()) if g == rt.group and p == rt.plural]


def api_versions(hostport):
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": hostport}]}


def api_group(g, versions):
    vs = [{"groupVersion": g + "/" + v, "version": v} for v in versions]
    return {"name": g, "versions": vs, "preferredVersion": vs[0]}


def api_group_list(sim):
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [api_group(g, vs) for g, vs in group_versions(sim) if g]}


def group(sim, g):
    for gg, vs in group_versions(sim):
        if gg == g and g:
            return dict(api_group(g, vs), kind="APIGroup", apiVersion="v1")
    return None


def resource_list(sim, g, v, connect):
    """APIResourceList of /api/v1 or /apis/G/V, or None when not served."""
    rts = _rts(sim, g, v)
    if not rts:
        return None
    res = []
    for rt in rts:
        res.extend(rt.discovery(_connect_of(connect, rt)))
    res.sort(key=lambda r: r["name"])
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": g + "/" + v if g else v,
            "resources": res}


def _agg_resource(rt, connect):
    d = {"resource": rt.plural, "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
         "scope": "Namespaced" if rt.namespaced else "Cluster", "singularResource": rt.singular,
         "verbs": rt.verbs}
    if rt.short_names:
        d["shortNames"] = rt.short_names
    if rt.categories:
        d["categories"] = rt.categories
    subs = []
    for e in rt.discovery(_connect_of(connect, rt))[0:]:
        if "/" not in e["name"]:
            continue
        rk = {"group": e.get("group", rt.group), "version": e.get("version", rt.version), "kind": e["kind"]}
        subs.append({"subresource": e["name"].split("/", 1)[1], "responseKind": rk, "verbs": e["verbs"]})
    if subs:
        d["subresources"] = subs
    return d


def aggregated(sim, core, ver, connect, stale=()):
    """APIGroupDiscoveryList for /api (core=True) or /apis; stale: "G/V"
    strings whose aggregated API cannot be reached (listed without resources,
    freshness Stale)."""
    items = []
    for g, vs in group_versions(sim):
        if bool(g) == core:
            continue
        versions = []
        for v in vs:
            gv = g + "/" + v if g else v
            if gv in stale:
                versions.append({"version": v, "freshness": "Stale"})
                continue
            versions.append({"version": v, "resources": [_agg_resource(rt, connect) for rt in _rts(sim, g, v)],
                             "freshness": "Current"})
        md = {"name": g, "creationTimestamp": None} if g else {"creationTimestamp": None}
        items.append({"metadata": md, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": AGG_TYPES[ver], "metadata": {}, "items": items}

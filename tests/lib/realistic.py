"""realistic.py: objects shaped like a real cluster's, for benchmarks.

Tiny identical ConfigMaps hide what real objects cost (issue 26): a real
cluster's objects are larger, nested, carry metadata.managedFields from
several managers and kubectl's last-applied annotation, and Secrets hold
incompressible data. This generator writes, per 100 objects (the mix of a
medium application cluster counted by kind; Deployments keep 10 old
ReplicaSets by default, hence many ReplicaSets):

    Pods 18, ReplicaSets 14, ConfigMaps 12, Events 11, Secrets 10,
    ServiceAccounts 8, Deployments 5, Services 5, Endpoints 5,
    RoleBindings 3, Roles 2, PersistentVolumeClaims 2, Jobs 2,
    StatefulSets 1, Ingresses 1, PodDisruptionBudgets 1

- Secrets: 1-50 KiB of JSON (log-uniform), random bytes (Opaque,
  kubernetes.io/tls, helm.sh/release.v1), so they hardly compress;
- ConfigMaps: 0.5-16 KiB of configuration text (log-uniform);
- workloads (Pods, ReplicaSets, Deployments, StatefulSets, Jobs): 1-3
  containers with env, resources, probes, mounts; status; ownerReferences;
- managedFields on every object, from the managers that write it in a real
  cluster (kubectl-client-side-apply, kube-controller-manager, kubelet,
  helm), with fieldsV1 derived from the object as the API server records
  it; kubectl's last-applied-configuration annotation on what users apply.

The average is about 5.3 KB of JSON per object (530 MB per 100k objects),
about 30% of it on the wire with gzip. Deterministic for a seed.

    from realistic import populate
    populate(sim, 10000, seed=1)                 # namespaces bench-00..
    populate(sim, 90000, seed=1, start=10000)    # 10k -> 100k
"""
import base64
import json
import random

MIX = (("Pod", 18), ("ReplicaSet", 14), ("Secret", 10), ("ConfigMap", 12), ("Event", 11),
       ("ServiceAccount", 8), ("Deployment", 5), ("Service", 5), ("Endpoints", 5),
       ("RoleBinding", 3), ("Role", 2), ("PersistentVolumeClaim", 2), ("Job", 2),
       ("StatefulSet", 1), ("Ingress", 1), ("PodDisruptionBudget", 1))
API = {"Pod": "v1", "Secret": "v1", "ConfigMap": "v1", "Event": "v1", "ServiceAccount": "v1",
       "Service": "v1", "Endpoints": "v1", "PersistentVolumeClaim": "v1",
       "ReplicaSet": "apps/v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1",
       "Job": "batch/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
       "Role": "rbac.authorization.k8s.io/v1", "Ingress": "networking.k8s.io/v1",
       "PodDisruptionBudget": "policy/v1"}
KINDS = [k for k, n in MIX for _ in range(n)]      # 100 slots
PER_NAMESPACE = 2000
# What a user restores into a namespace (controller-made Pods, ReplicaSets,
# Endpoints and Events left out), in the same proportions.
RESTORABLE = [k for k in KINDS if k not in ("Pod", "ReplicaSet", "Endpoints", "Event")]
TS = "2026-11-%02dT%02d:%02d:%02dZ"
WORDS = ("server", "port", "timeout", "replicas", "cache", "enabled", "log", "level", "info",
         "debug", "url", "http", "backend", "pool", "size", "retry", "limit", "path", "metrics",
         "tracing", "sample", "rate", "queue", "worker", "database", "host", "user", "region")
APPS = ("api", "web", "worker", "auth", "billing", "search", "cart", "gateway", "ingest",
        "notify", "report", "scheduler", "cache", "frontend", "orders", "payments")


def _ts(r):
    return TS % (r.randint(1, 28), r.randint(0, 23), r.randint(0, 59), r.randint(0, 59))


def _hex(r, n):
    return "%0*x" % (n, r.getrandbits(4 * n))


def _logu(r, lo, hi):
    """Log-uniform integer in [lo, hi]."""
    return int(round(lo * (hi / lo) ** r.random()))


def fields(v):
    """fieldsV1 of a value as the API server records it: maps by key,
    lists of named maps by their name, other lists and scalars as leaves."""
    if isinstance(v, dict):
        return {"f:" + k: fields(x) for k, x in v.items()}
    if isinstance(v, list) and v and all(isinstance(x, dict) and "name" in x for x in v):
        out = {}
        for x in v:
            sub = fields({k: y for k, y in x.items() if k != "name"})
            sub["."] = {}
            sub["f:name"] = {}
            out['k:{"name":"%s"}' % x["name"]] = sub
        return out
    return {}


def _mf(manager, op, api, value, ts, sub=None):
    e = {"manager": manager, "operation": op, "apiVersion": api, "time": ts,
         "fieldsType": "FieldsV1", "fieldsV1": fields(value)}
    if sub:
        e["subresource"] = sub
    return e


def _labels(r, app):
    return {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-" + _hex(r, 4),
            "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/managed-by": "Helm",
            "pod-template-hash": _hex(r, 10)}


def _container(r, app, i):
    env = [{"name": "%s_%s" % (r.choice(WORDS).upper(), r.choice(WORDS).upper()),
            "value": "%s-%d" % (r.choice(WORDS), r.randint(0, 99999))} for _ in range(r.randint(2, 8))]
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                               "fieldPath": "metadata.name"}}})
    probe = {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 10,
             "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    return {"name": app if i == 0 else "sidecar-%d" % i,
            "image": "registry.example.com/shop/%s:1.%d.%d@sha256:%s" % (app, r.randint(0, 40),
                                                                     r.randint(0, 9), _hex(r, 64)),
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": env,
            "resources": {"limits": {"cpu": "%dm" % r.choice((250, 500, 1000)), "memory": "%dMi" % r.choice((256, 512, 1024))},
                          "requests": {"cpu": "%dm" % r.choice((50, 100, 200)), "memory": "%dMi" % r.choice((64, 128, 256))}},
            "livenessProbe": probe, "readinessProbe": dict(probe, httpGet=dict(probe["httpGet"], path="/ready")),
            "volumeMounts": [{"name": "config", "mountPath": "/etc/%s" % app, "readOnly": True},
                             {"name": "kube-api-access-" + _hex(r, 5), "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}}


def _pod_spec(r, app):
    return {"containers": [_container(r, app, i) for i in range(r.choice((1, 1, 1, 1, 2)))],
            "volumes": [{"name": "config", "configMap": {"name": app + "-config", "defaultMode": 420}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": app, "serviceAccount": app, "schedulerName": "default-scheduler",
            "securityContext": {"fsGroup": 2000}, "enableServiceLinks": True,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}]}


def _template(r, app, labels):
    return {"metadata": {"labels": labels, "annotations": {"checksum/config": _hex(r, 64)}},
            "spec": _pod_spec(r, app)}


def _owner(r, kind, name, api="apps/v1"):
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": _uuid(r),
             "controller": True, "blockOwnerDeletion": True}]


def _uuid(r):
    h = _hex(r, 32)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def _applied(obj):
    """kubectl's last-applied-configuration of what a user applied."""
    keep = {k: v for k, v in obj.items() if k not in ("status",)}
    md = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels")}
    keep["metadata"] = md
    return json.dumps(keep, separators=(",", ":"), sort_keys=True) + "\n"


def make(kind, name, ns, r):
    """One object of kind (a dict with apiVersion, kind, metadata)."""
    app = r.choice(APPS)
    ts = _ts(r)
    md = {"name": name, "namespace": ns}
    o = {"apiVersion": API[kind], "kind": kind, "metadata": md}
    mf = []
    if kind == "Secret":
        target = _logu(r, 1024, 50 << 10)
        typ = r.choice(("Opaque", "Opaque", "kubernetes.io/tls", "helm.sh/release.v1"))
        o["type"] = typ
        raw = (target - 300) * 3 // 4
        if typ == "kubernetes.io/tls":
            half = max(16, raw // 2)
            o["data"] = {"tls.crt": base64.b64encode(r.randbytes(half)).decode(),
                         "tls.key": base64.b64encode(r.randbytes(max(16, raw - half))).decode()}
        elif typ == "helm.sh/release.v1":
            md["labels"] = {"owner": "helm", "name": app, "status": "deployed",
                            "version": str(r.randint(1, 40))}
            o["data"] = {"release": base64.b64encode(r.randbytes(max(16, raw))).decode()}
        else:
            n = r.randint(1, 6)
            o["data"] = {"%s.%s" % (r.choice(WORDS), r.choice(("key", "json", "token", "pem"))) + str(i):
                         base64.b64encode(r.randbytes(max(8, raw // n))).decode() for i in range(n)}
        md["labels"] = md.get("labels") or {"app.kubernetes.io/name": app}
        mf.append(_mf("helm" if typ == "helm.sh/release.v1" else "kubectl-create", "Update", "v1",
                      {"data": o["data"], "metadata": {"labels": md["labels"]}, "type": typ}, ts))
    elif kind == "ConfigMap":
        target = _logu(r, 512, 16 << 10)
        lines, size = [], 0
        while size < target:
            ln = "%s.%s.%s: %s" % (r.choice(WORDS), r.choice(WORDS), r.choice(WORDS),
                                   r.choice(("true", "false", str(r.randint(0, 100000)),
                                             "%s-%s" % (r.choice(WORDS), _hex(r, 6)))))
            lines.append(ln)
            size += len(ln) + 1
        o["data"] = {"application.yaml": "\n".join(lines) + "\n"}
        md["labels"] = {"app.kubernetes.io/name": app}
        md["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": ""}
        md["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = _applied(
            {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": ns,
                                                              "labels": md["labels"]},
             "data": {"application.yaml": "(see data)"}})
        mf.append(_mf("kubectl-client-side-apply", "Update", "v1",
                      {"data": o["data"], "metadata": {"annotations": md["annotations"],
                                                       "labels": md["labels"]}}, ts))
    elif kind in ("Pod", "ReplicaSet", "Deployment", "StatefulSet", "Job"):
        labels = _labels(r, app)
        md["labels"] = labels
        if kind == "Pod":
            o["spec"] = _pod_spec(r, app)
            o["spec"]["nodeName"] = "node-%03d" % r.randint(0, 199)
            md["generateName"] = name.rsplit("-", 1)[0] + "-"
            md["ownerReferences"] = _owner(r, "ReplicaSet", md["generateName"][:-1])
            cs = [{"name": c["name"], "ready": True, "restartCount": r.choice((0, 0, 0, 1, 4)),
                   "image": c["image"].split("@")[0], "imageID": c["image"], "started": True,
                   "containerID": "containerd://" + _hex(r, 64),
                   "state": {"running": {"startedAt": ts}}, "lastState": {}}
                  for c in o["spec"]["containers"]]
            o["status"] = {"phase": "Running", "hostIP": "10.0.%d.%d" % (r.randint(0, 255), r.randint(1, 254)),
                           "podIP": "10.244.%d.%d" % (r.randint(0, 255), r.randint(1, 254)),
                           "startTime": ts, "qosClass": "Burstable",
                           "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                                           "lastTransitionTime": ts} for t in
                                          ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                           "containerStatuses": cs}
            mf.append(_mf("kube-controller-manager", "Update", "v1",
                          {"metadata": {"generateName": "", "labels": labels,
                                        "ownerReferences": md["ownerReferences"]}, "spec": o["spec"]}, ts))
            mf.append(_mf("kubelet", "Update", "v1", {"status": o["status"]}, ts, "status"))
        else:
            spec = {"template": _template(r, app, labels)}
            if kind != "Job":
                spec["replicas"] = r.choice((1, 2, 3, 3, 5))
                spec["selector"] = {"matchLabels": {"app.kubernetes.io/name": app}}
            else:
                spec["template"]["spec"]["restartPolicy"] = "Never"
                spec["backoffLimit"] = 6
            if kind == "Deployment":
                spec.update({"revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                             "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%",
                                                                                     "maxUnavailable": "25%"}}})
            o["spec"] = spec
            n = spec.get("replicas", 1)
            o["status"] = {"replicas": n, "readyReplicas": n, "availableReplicas": n,
                           "observedGeneration": r.randint(1, 30)}
            if kind == "Deployment":
                md["annotations"] = {"deployment.kubernetes.io/revision": str(r.randint(1, 30)),
                                     "meta.helm.sh/release-name": app, "meta.helm.sh/release-namespace": ns}
                md["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = _applied(o)
                o["status"]["conditions"] = [
                    {"type": "Available", "status": "True", "lastUpdateTime": ts, "lastTransitionTime": ts,
                     "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                    {"type": "Progressing", "status": "True", "lastUpdateTime": ts, "lastTransitionTime": ts,
                     "reason": "NewReplicaSetAvailable",
                     "message": 'ReplicaSet "%s-%s" has successfully progressed.' % (app, _hex(r, 10))}]
                mf.append(_mf("kubectl-client-side-apply", "Update", "apps/v1",
                              {"metadata": {"annotations": md["annotations"], "labels": labels},
                               "spec": spec}, ts))
            else:
                owner = {"ReplicaSet": "Deployment", "StatefulSet": None, "Job": "CronJob"}[kind]
                if owner:
                    md["ownerReferences"] = _owner(r, owner, app, "apps/v1" if owner == "Deployment"
                                                   else "batch/v1")
                md["annotations"] = {"deployment.kubernetes.io/revision": str(r.randint(1, 30))}
                mf.append(_mf("kube-controller-manager", "Update", API[kind],
                              {"metadata": {"annotations": md["annotations"], "labels": labels,
                                            "ownerReferences": md.get("ownerReferences", [])},
                               "spec": spec}, ts))
            mf.append(_mf("kube-controller-manager", "Update", API[kind], {"status": o["status"]}, ts,
                          "status"))
    elif kind == "Event":
        reason = r.choice(("Scheduled", "Pulled", "Created", "Started", "Killing", "BackOff", "Unhealthy"))
        o.update({"involvedObject": {"kind": "Pod", "namespace": ns, "name": "%s-%s" % (app, _hex(r, 5)),
                                     "uid": _uuid(r), "apiVersion": "v1",
                                     "resourceVersion": str(r.randint(1, 10 ** 7)),
                                     "fieldPath": "spec.containers{%s}" % app},
                  "reason": reason, "message": "%s: %s %s %s" % (reason, r.choice(WORDS), r.choice(WORDS), _hex(r, 12)),
                  "source": {"component": "kubelet", "host": "node-%03d" % r.randint(0, 199)},
                  "firstTimestamp": ts, "lastTimestamp": ts, "count": r.randint(1, 50), "type": "Normal",
                  "reportingComponent": "kubelet", "reportingInstance": "node-%03d" % r.randint(0, 199)})
        mf.append(_mf("kubelet", "Update", "v1", {k: o[k] for k in ("count", "firstTimestamp",
                                                                       "involvedObject", "lastTimestamp",
                                                                       "message", "reason", "source",
                                                                       "type")}, ts))
    elif kind == "ServiceAccount":
        md["labels"] = {"app.kubernetes.io/name": app}
        md["annotations"] = {"meta.helm.sh/release-name": app, "meta.helm.sh/release-namespace": ns}
        mf.append(_mf("helm", "Update", "v1", {"metadata": {"annotations": md["annotations"],
                                                             "labels": md["labels"]}}, ts))
    elif kind == "Service":
        md["labels"] = {"app.kubernetes.io/name": app}
        o["spec"] = {"type": "ClusterIP", "clusterIP": "10.96.%d.%d" % (r.randint(0, 255), r.randint(1, 254)),
                     "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
                     "selector": {"app.kubernetes.io/name": app}, "sessionAffinity": "None"}
        o["spec"]["clusterIPs"] = [o["spec"]["clusterIP"]]
        md["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": _applied(o)}
        mf.append(_mf("kubectl-client-side-apply", "Update", "v1",
                      {"metadata": {"annotations": md["annotations"], "labels": md["labels"]},
                       "spec": {k: v for k, v in o["spec"].items() if k not in ("clusterIP", "clusterIPs")}}, ts))
    elif kind == "Endpoints":
        md["labels"] = {"app.kubernetes.io/name": app}
        o["subsets"] = [{"addresses": [{"ip": "10.244.%d.%d" % (r.randint(0, 255), r.randint(1, 254)),
                                        "nodeName": "node-%03d" % r.randint(0, 199),
                                        "targetRef": {"kind": "Pod", "namespace": ns,
                                                      "name": "%s-%s" % (app, _hex(r, 5)), "uid": _uuid(r)}}
                                       for _ in range(r.randint(1, 5))],
                         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]
        mf.append(_mf("kube-controller-manager", "Update", "v1", {"metadata": {"labels": md["labels"]},
                                                                   "subsets": o["subsets"]}, ts))
    elif kind in ("Role", "RoleBinding"):
        md["labels"] = {"app.kubernetes.io/name": app}
        if kind == "Role":
            o["rules"] = [{"apiGroups": [r.choice(("", "apps", "batch"))],
                           "resources": r.sample(("pods", "configmaps", "secrets", "services", "jobs",
                                                  "deployments", "events", "leases"), 3),
                           "verbs": ["get", "list", "watch"]} for _ in range(r.randint(1, 4))]
            val = {"rules": o["rules"]}
        else:
            o["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": app}
            o["subjects"] = [{"kind": "ServiceAccount", "name": app, "namespace": ns}]
            val = {"roleRef": o["roleRef"], "subjects": o["subjects"]}
        val["metadata"] = {"labels": md["labels"]}
        mf.append(_mf("helm", "Update", API[kind], val, ts))
    elif kind == "PersistentVolumeClaim":
        o["spec"] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "%dGi" % r.choice((1, 5, 20))}},
                     "storageClassName": "standard", "volumeMode": "Filesystem"}
        mf.append(_mf("kubectl-create", "Update", "v1", {"spec": o["spec"]}, ts))
    elif kind == "Ingress":
        o["spec"] = {"ingressClassName": "nginx", "rules": [{"host": "%s.shop.example.com" % app, "http": {
            "paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": app, "port": {"number": 80}}}}]}}],
            "tls": [{"hosts": ["%s.shop.example.com" % app], "secretName": app + "-tls"}]}
        md["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": _applied(o)}
        mf.append(_mf("kubectl-client-side-apply", "Update", API[kind], {"spec": o["spec"]}, ts))
    elif kind == "PodDisruptionBudget":
        o["spec"] = {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": app}}}
        mf.append(_mf("helm", "Update", API[kind], {"spec": o["spec"]}, ts))
    md["managedFields"] = mf
    return o


def objects(n, seed=1, start=0, kinds=None, namespace=None):
    """Objects start .. start+n-1 (the i-th object is the same whatever n).
    kinds: a list of kinds to cycle through instead of MIX (e.g. RESTORABLE);
    namespace: all in this one instead of bench-NN (2000 objects each)."""
    kinds = kinds or KINDS
    for i in range(start, start + n):
        r = random.Random(seed * 1000003 + i)
        kind = kinds[i % len(kinds)]
        ns = namespace or "bench-%02d" % (i // PER_NAMESPACE)
        name = "%s-%07d" % (kind.lower(), i)
        if kind == "Pod":
            name = "%s-%s-%s" % (name, _hex(r, 10), _hex(r, 5))
        yield make(kind, name, ns, r)


def namespaces(n, start=0):
    """The namespaces objects start .. start+n-1 live in."""
    return sorted({"bench-%02d" % (i // PER_NAMESPACE) for i in range(start, start + n)})


def populate(sim, n, seed=1, start=0, batch=400):
    """Create objects start .. start+n-1 in kubesim sim (and their
    namespaces) through /_sim/bulk; returns the bytes of JSON created."""
    for ns in namespaces(n, start):
        if sim.get("/api/v1/namespaces/" + ns)[0] == 404:
            sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": ns}})
    total, chunk = 0, []

    def flush():
        body = b'{"raw":true,"items":[' + b",".join(chunk) + b"]}"
        r = sim.ok("POST", "/_sim/bulk", body, timeout=300)
        if r.get("created") != len(chunk):
            raise RuntimeError("bulk create: %d of %d created" % (r.get("created"), len(chunk)))
    for o in objects(n, seed, start):
        data = json.dumps(o, separators=(",", ":")).encode()
        total += len(data)
        chunk.append(data)
        if len(chunk) >= batch:
            flush()
            chunk = []
    if chunk:
        flush()
    return total

"""Pod Security admission: kubesim's (tests/kubesim/ks_psa.py) as the real
kube-apiserver answers, checked with the real kubectl, and cairn install
against namespaces that enforce a level.

- kubesim refuses pods that break the namespace's enforce level with the
  real 403 text, warns (Warning headers, printed by kubectl) for warn
  levels and for workloads, says nothing about a workload when only
  enforce is set (the real gotcha), refuses invalid labels with 422, and
  warns about existing pods when the enforce level is tightened;
- `cairn install --dry-run -o yaml --provider s3` applies to a namespace
  that enforces (and warns at) "restricted" without a single warning, and
  a pod made from its StatefulSet, as the controller makes it, is admitted;
- local-directory storage (a hostPath) in a "baseline" namespace:
  `cairn install` stops before writing the StatefulSet with a message
  that says why and what to do; the manifest's pods are refused with the
  real text; labelled "privileged" (the documented level) it installs and
  its pods are admitted; the node-agent needs "privileged" too.
"""
import json

import yaml

from cairntest import case, main, cairn

NS = "cairn-system"


def ns_with(sim, **labels):
    """The namespace as an admin makes it: created (no last-applied annotation), then labelled."""
    sim.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    sim.kubectl("label", "namespace", NS, *["pod-security.kubernetes.io/%s=%s" % kv for kv in labels.items()])


def manifest(*args):
    r = cairn("install", "--dry-run", "-o", "yaml", *args)
    if r.returncode != 0:
        raise AssertionError("cairn install --dry-run: %s" % r.stderr)
    return r.stdout, [d for d in yaml.safe_load_all(r.stdout) if d]


def pod_from(workload, name):
    """The pod the StatefulSet/DaemonSet controller would create."""
    tmpl = workload["spec"]["template"]
    spec = json.loads(json.dumps(tmpl["spec"]))
    for pvc in workload["spec"].get("volumeClaimTemplates", []):
        n = pvc["metadata"]["name"]
        spec.setdefault("volumes", []).append(
            {"name": n, "persistentVolumeClaim": {"claimName": "%s-%s" % (n, name)}})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": tmpl["metadata"]["labels"]},
            "spec": spec}


def warnings(stderr):
    """The API server's Warnings as kubectl prints them (not kubectl's own about last-applied annotations)."""
    return [l[len("Warning: "):] for l in stderr.splitlines()
            if l.startswith("Warning: ") and "last-applied-configuration" not in l]


@case
def kubesim_admits_pods_as_the_real_server(t):
    sim = t.kubesim()
    ns_with(sim, enforce="restricted", warn="restricted")
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": NS},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(bare), check=False)
    t.eq(r.returncode, 1, "a bare pod in a restricted namespace")
    t.check('pods "web" is forbidden: violates PodSecurity "restricted:latest": '
            'allowPrivilegeEscalation != false (container "nginx" must set '
            'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities '
            '(container "nginx" must set securityContext.capabilities.drop=["ALL"]), '
            'runAsNonRoot != true (pod or container "nginx" must set '
            'securityContext.runAsNonRoot=true), seccompProfile (pod or container "nginx" must '
            'set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")' in r.stderr,
            r.stderr)
    st, body, _ = sim.post("/api/v1/namespaces/%s/pods" % NS, bare)
    t.eq((st, body["reason"], body["details"]), (403, "Forbidden", {"name": "web", "kind": "pods"}),
         "the Status of the refusal")
    # A workload is never refused, only warned about (with a warn label).
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                        "hostNetwork": True,
                        "containers": [{"name": "c", "image": "nginx", "securityContext": {
                            "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                            "seccompProfile": {"type": "RuntimeDefault"},
                            "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}}}],
                        "volumes": [{"name": "h", "hostPath": {"path": "/srv"}}]}}}}
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(dep))
    t.eq(warnings(r.stderr), ['would violate PodSecurity "restricted:latest": host namespaces '
                              '(hostNetwork=true), unrestricted capabilities (container "c" must not '
                              'include "NET_ADMIN" in securityContext.capabilities.add), restricted '
                              'volume types (volume "h" uses restricted volume type "hostPath")'],
         "warning for the Deployment")
    # enforce only: the workload is stored without a word (its pods fail later).
    sim.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/warn-")
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(dict(dep, metadata={"name": "quiet", "namespace": NS})))
    t.eq(warnings(r.stderr), [], "no warning without a warn label")
    # baseline names the baseline checks only.
    sim.kubectl("label", "namespace", NS, "--overwrite", "pod-security.kubernetes.io/enforce=baseline")
    pod = dict(dep["spec"]["template"], apiVersion="v1", kind="Pod", metadata={"name": "hp", "namespace": NS})
    r = sim.kubectl("apply", "-f", "-", input=json.dumps(pod), check=False)
    t.check('pods "hp" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities '
            '(container "c" must not include "NET_ADMIN" in securityContext.capabilities.add), host '
            'namespaces (hostNetwork=true), hostPath volumes (volume "h")' in r.stderr, r.stderr)
    # Invalid labels: 422 with the field error.
    r = sim.kubectl("label", "namespace", NS, "--overwrite", "pod-security.kubernetes.io/enforce=strict",
                    check=False)
    t.check('Namespace "cairn-system" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
            'Invalid value: "strict": must be one of privileged, baseline, restricted' in r.stderr, r.stderr)
    # Tightening the enforce level warns about the pods already there.
    sim.kubectl("label", "namespace", NS, "--overwrite", "pod-security.kubernetes.io/enforce=privileged")
    sim.kubectl("apply", "-f", "-", input=json.dumps(pod))
    r = sim.kubectl("label", "namespace", NS, "--overwrite", "pod-security.kubernetes.io/enforce=baseline")
    t.eq(warnings(r.stderr), ['existing pods in namespace "cairn-system" violate the new PodSecurity '
                              'enforce level "baseline:latest"',
                              'hp: non-default capabilities, host namespaces, hostPath volumes'],
         "warnings of the namespace update")


@case
def s3_manifest_applies_under_restricted(t):
    sim = t.kubesim()
    ns_with(sim, enforce="restricted", warn="restricted", audit="restricted")
    out, docs = manifest("--provider", "s3", "--bucket", "edge")
    r = sim.kubectl("apply", "-f", "-", input=out)
    t.eq(r.stdout.count(" created") + r.stdout.count(" configured"), len(docs), "every object applied")
    t.eq(warnings(r.stderr), [], "warnings from a restricted namespace")
    ss = next(d for d in docs if d["kind"] == "StatefulSet")
    t.eq(ss["spec"]["replicas"], 2, "replicas")
    st, body, _ = sim.post("/api/v1/namespaces/%s/pods" % NS, pod_from(ss, "cairn-0"))
    t.eq(st, 201, "the server pod is admitted: %s" % body)
    # The node-agent is privileged: the same namespace refuses its pods.
    _, docs = manifest("--provider", "s3", "--bucket", "edge", "--use-node-agent")
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    st, body, _ = sim.post("/api/v1/namespaces/%s/pods" % NS, pod_from(ds, "cairn-node-agent-x1"))
    t.eq(st, 403, "node-agent pod in a restricted namespace")
    t.check('violates PodSecurity "restricted:latest": unrestricted capabilities' in body["message"] and
            'use restricted volume type "hostPath"' in body["message"], body["message"])
    # cairn install itself checks before writing (an upgrade here), and goes ahead.
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--provider", "s3", "--bucket", "edge",
              "--image", "registry.local/cairn:0.2.0")
    t.eq(r.returncode, 0, "install into a restricted namespace: %s" % r.stderr)
    checks = [q for q in sim.requests() if q["method"] == "POST" and q["path"].endswith("/pods")
              and "dryRun=All" in q["query"]]
    t.check(checks and all(q["status"] == 201 for q in checks), "dry-run pod checks: %s" % checks)


@case
def local_directory_refused_by_baseline_with_a_clear_message(t):
    sim = t.kubesim()
    ns_with(sim, enforce="baseline", warn="baseline")
    r = cairn("install", "--kubeconfig", sim.kubeconfig)
    t.eq(r.returncode, 1, "fs install into a baseline namespace")
    for what in ('violates PodSecurity "baseline:latest": hostPath volumes (volume "backups")',
                 'only the "privileged" Pod Security level allows',
                 "kubectl label namespace cairn-system pod-security.kubernetes.io/enforce=privileged",
                 "--provider s3"):
        t.check(what in r.stderr, "%r not in: %s" % (what, r.stderr))
    st, _, _ = sim.get("/apis/apps/v1/namespaces/%s/statefulsets/cairn" % NS)
    t.eq(st, 404, "no StatefulSet written")
    # The manifest: kubectl warns, and the controller's pods are refused.
    out, docs = manifest()
    r = sim.kubectl("apply", "-f", "-", input=out)
    t.eq(warnings(r.stderr), ['would violate PodSecurity "baseline:latest": hostPath volumes (volume "backups")'],
         "kubectl's warning")
    ss = next(d for d in docs if d["kind"] == "StatefulSet")
    st, body, _ = sim.post("/api/v1/namespaces/%s/pods" % NS, pod_from(ss, "cairn-0"))
    t.eq((st, body.get("message")), (403, 'pods "cairn-0" is forbidden: violates PodSecurity '
                                          '"baseline:latest": hostPath volumes (volume "backups")'),
         "the server pod")
    # The documented level: privileged.
    sim.kubectl("label", "namespace", NS, "--overwrite", "pod-security.kubernetes.io/enforce=privileged",
                "pod-security.kubernetes.io/warn=privileged")
    r = cairn("install", "--kubeconfig", sim.kubeconfig, "--use-node-agent")
    t.eq(r.returncode, 0, "install with the namespace privileged: %s" % r.stderr)
    st, body, _ = sim.post("/api/v1/namespaces/%s/pods" % NS, pod_from(ss, "cairn-0"))
    t.eq(st, 201, "server pod admitted: %s" % body)


@case
def local_directory_pinned_to_its_node(t):
    sim = t.kubesim()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge-1"}}
    sim.ok("POST", "/api/v1/nodes", node)
    cairn_args = ("install", "--kubeconfig", sim.kubeconfig)
    r = cairn(*cairn_args)
    t.eq(r.returncode, 0, r.stderr)

    def pin():
        _, ss, _ = sim.get("/apis/apps/v1/namespaces/%s/statefulsets/cairn" % NS)
        terms = ss["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        return terms[0]["matchFields"]
    t.eq(pin(), [{"key": "metadata.name", "operator": "In", "values": ["edge-1"]}],
         "pinned to the only node")
    # A second node: the pin stays, a re-run changes nothing.
    sim.ok("POST", "/api/v1/nodes", dict(node, metadata={"name": "edge-2"}))
    r = cairn(*cairn_args)
    t.check(r.returncode == 0 and "nothing changed" in r.stdout, r.stdout + r.stderr)
    # A fresh install on several nodes must be told which.
    r = cairn(*cairn_args, "-n", "other")
    t.eq(r.returncode, 2, "fs on several nodes without --node")
    t.check("--node NAME" in r.stderr and "several nodes" in r.stderr, r.stderr)
    r = cairn(*cairn_args, "-n", "other", "--node", "edge-2")
    t.eq(r.returncode, 0, r.stderr)
    r = cairn(*cairn_args, "--provider", "s3", "--bucket", "b", "--node", "edge-2")
    t.eq(r.returncode, 2, "--node with s3 refused")


main()

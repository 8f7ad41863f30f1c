#!/usr/bin/env python3
"""kubesim's light controllers, driven with the real kubectl: terminating
namespaces, the batch Job strategy, a PersistentVolume binder, graceful pod
deletion; and the kinder world a test asks for with controllers=False."""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("CAIRN_SRCDIR") or
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), "tests", "lib"))
from cairntest import case, main, wait_for  # noqa: E402


def need_kubectl(t):
    if shutil.which("kubectl") is None:
        t.skip("kubectl not installed")


def ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cm(name, namespace, finalizers=None):
    o = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}}
    if finalizers:
        o["metadata"]["finalizers"] = finalizers
    return o


def get(sim, *args):
    r = sim.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


@case
def namespace_stays_terminating(t):
    need_kubectl(t)
    sim = t.kubesim(namespace_delete_seconds=1.5)
    sim.apply([ns("app"), cm("c1", "app"), cm("held", "app", ["example.io/hold"])])
    t.eq(get(sim, "ns", "app")["spec"], {"finalizers": ["kubernetes"]}, "namespace strategy adds its finalizer")
    sim.kubectl("delete", "ns", "app", "--wait=false")
    got = get(sim, "ns", "app")
    t.eq(got["status"]["phase"], "Terminating", "phase right after DELETE")
    t.check(get(sim, "cm", "c1", "-n", "app") is not None, "content still there while the controller has not run")
    r = sim.kubectl("create", "-f", "-", input=json.dumps(cm("c2", "app")), check=False)
    t.check(r.returncode != 0 and "Error from server (Forbidden)" in r.stderr and
            'configmaps "c2" is forbidden: unable to create new content in namespace app because it is being terminated'
            in r.stderr, "create inside: %s" % r.stderr)
    st, body, _ = sim.post("/api/v1/namespaces/app/configmaps", cm("c3", "app"))
    t.eq((st, body["details"]["causes"]), (403, [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                                  "message": "namespace app is being terminated"}]), "403 cause")
    r = sim.kubectl("create", "-f", "-", input=json.dumps(ns("app")), check=False)
    t.check(r.returncode != 0 and "AlreadyExists" in r.stderr, "create of the namespace: %s" % r.stderr)
    # the controller deletes the content; the object with a finalizer holds the namespace
    wait_for(lambda: get(sim, "cm", "c1", "-n", "app") is None, 15, "content deleted")
    held = get(sim, "cm", "held", "-n", "app")
    t.check(held and held["metadata"].get("deletionTimestamp"), "finalizer object is being deleted")
    time.sleep(0.5)
    t.check(get(sim, "ns", "app") is not None, "namespace waits for the finalizer")
    sim.kubectl("patch", "cm", "held", "-n", "app", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_for(lambda: get(sim, "ns", "app") is None, 15, "namespace gone")
    sim.apply([ns("app"), cm("c1", "app")])
    t.eq(get(sim, "ns", "app")["status"]["phase"], "Active", "recreated")


@case
def kinder_world_deletes_namespaces_at_once(t):
    need_kubectl(t)
    sim = t.kubesim(controllers=False)
    sim.apply([ns("app"), cm("c1", "app")])
    sim.kubectl("delete", "ns", "app", "--wait=false")
    t.check(get(sim, "ns", "app") is None, "namespace gone at once without the controller")


JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "default"},
       "spec": {"template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "pi", "image": "perl"}]}}}}


@case
def job_gets_a_generated_selector(t):
    need_kubectl(t)
    sim = t.kubesim()
    sim.kubectl("create", "-f", "-", input=json.dumps(JOB))
    job = get(sim, "job", "pi")
    uid = job["metadata"]["uid"]
    t.eq(job["spec"]["selector"], {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}, "generated selector")
    t.eq(job["spec"]["template"]["metadata"]["labels"],
         {"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid, "job-name": "pi",
          "batch.kubernetes.io/job-name": "pi"}, "generated labels")
    t.eq((job["spec"]["backoffLimit"], job["spec"]["completions"]), (6, 1), "defaults")
    # the same Job as a backup holds it, created again: the old uid does not match
    again = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi2", "namespace": "default"},
             "spec": {"selector": job["spec"]["selector"], "template": job["spec"]["template"]}}
    r = sim.kubectl("create", "-f", "-", input=json.dumps(again), check=False)
    t.check(r.returncode != 0 and 'The Job "pi2" is invalid' in r.stderr and "`selector` not auto-generated" in r.stderr
            and "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]: Invalid value" in r.stderr,
            "422 of the batch strategy: %s" % r.stderr)
    st, body, _ = sim.post("/apis/batch/v1/namespaces/default/jobs", again)
    t.eq((st, body["reason"], body["details"]["kind"]), (422, "Invalid", "Job"), "status")
    t.check(('spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{'
             '"batch.kubernetes.io/controller-uid":"%s"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: '
             '`selector` not auto-generated' % uid) in body["message"], body["message"])
    again["spec"]["manualSelector"] = True
    sim.kubectl("create", "-f", "-", input=json.dumps(again))
    t.eq(get(sim, "job", "pi2")["spec"]["selector"], job["spec"]["selector"], "manualSelector keeps it")
    bad = json.loads(json.dumps(JOB))
    bad["metadata"]["name"] = "pi3"
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    st, body, _ = sim.post("/apis/batch/v1/namespaces/default/jobs", bad)
    t.check(st == 422 and 'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
            '"OnFailure", "Never"' in body["message"], "restartPolicy: %s" % body)


def pv(name, claim=None, policy=None, size="1Gi"):
    o = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
         "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/" + name}}}
    if claim:
        o["spec"]["claimRef"] = claim
    if policy:
        o["spec"]["persistentVolumeReclaimPolicy"] = policy
    return o


def pvc(name, volume=None, annotations=None, size="1Gi"):
    o = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}
    if volume:
        o["spec"]["volumeName"] = volume
    if annotations:
        o["metadata"]["annotations"] = annotations
    return o


def phase(sim, kind, name):
    o = get(sim, kind, name)
    return o and o.get("status", {}).get("phase")


@case
def pv_binder_binds_loses_and_releases(t):
    need_kubectl(t)
    sim = t.kubesim()
    # a claim naming an unclaimed volume binds, both Bound
    sim.apply([pv("pv-a"), pvc("data-a", "pv-a")])
    wait_for(lambda: phase(sim, "pvc", "data-a") == "Bound" and phase(sim, "pv", "pv-a") == "Bound", 10, "bound")
    a = get(sim, "pv", "pv-a")
    c = get(sim, "pvc", "data-a")
    t.eq((a["spec"]["claimRef"]["name"], a["spec"]["claimRef"]["uid"]), ("data-a", c["metadata"]["uid"]), "claimRef")
    t.eq(c["metadata"]["annotations"].get("pv.kubernetes.io/bind-completed"), "yes", "bind-completed")
    t.eq((a["spec"]["persistentVolumeReclaimPolicy"], c["status"]["capacity"]), ("Retain", {"storage": "1Gi"}),
         "defaults and status")
    raw = sim.ok("GET", "/api/v1/namespaces/default/persistentvolumeclaims/data-a")
    mgrs = {(e["manager"], e.get("subresource", "")) for e in raw["metadata"]["managedFields"]}
    t.check(("kube-controller-manager", "") in mgrs and ("kube-controller-manager", "status") in mgrs,
            "the binder's writes are recorded as kube-controller-manager: %s" % mgrs)
    # restored as is: bind-completed, but the volume is missing -> Lost
    sim.apply(pvc("data-b", "pv-missing", {"pv.kubernetes.io/bind-completed": "yes"}))
    wait_for(lambda: phase(sim, "pvc", "data-b") == "Lost", 10, "Lost (volume missing)")
    # bind-completed and the volume's claimRef names another uid -> Lost
    sim.apply(pv("pv-c", {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data-c",
                          "uid": "0d6a5b7c-0000-4000-8000-000000000000"}))
    sim.apply(pvc("data-c", "pv-c", {"pv.kubernetes.io/bind-completed": "yes"}))
    wait_for(lambda: phase(sim, "pvc", "data-c") == "Lost", 10, "Lost (claimRef.uid differs)")
    # a volume whose claimRef names no claim: Released; with reclaim policy Delete it is deleted
    sim.apply(pv("pv-d", {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "gone",
                          "uid": "1d6a5b7c-0000-4000-8000-000000000000"}))
    wait_for(lambda: phase(sim, "pv", "pv-d") == "Released", 10, "Released")
    sim.apply(pv("pv-e", {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "gone",
                          "uid": "2d6a5b7c-0000-4000-8000-000000000000"}, policy="Delete"))
    wait_for(lambda: get(sim, "pv", "pv-e") is None, 10, "released Delete volume deleted")
    # pre-bound by name (no uid, as Velero restores it) + a claim without volumeName: bound
    sim.apply(pv("pv-f", {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data-f"}))
    wait_for(lambda: phase(sim, "pv", "pv-f") == "Available", 10, "pre-bound volume Available")
    sim.apply(pvc("data-f"))
    wait_for(lambda: phase(sim, "pvc", "data-f") == "Bound", 10, "pre-bound claim bound")
    t.eq(get(sim, "pvc", "data-f")["spec"]["volumeName"], "pv-f", "volumeName set by the binder")
    # deleting the claim of a Retain volume releases it
    sim.kubectl("delete", "pvc", "data-a")
    wait_for(lambda: phase(sim, "pv", "pv-a") == "Released", 10, "Released after its claim went")


@case
def pods_are_deleted_with_a_grace_period(t):
    need_kubectl(t)
    sim = t.kubesim(pod_delete_seconds=1.5)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]}}
    sim.apply(pod)
    t.eq(get(sim, "pod", "web")["spec"]["terminationGracePeriodSeconds"], 30, "defaulted grace period")
    sim.kubectl("delete", "pod", "web", "--wait=false")
    p = get(sim, "pod", "web")
    t.check(p and p["metadata"].get("deletionTimestamp") and p["metadata"]["deletionGracePeriodSeconds"] == 30,
            "terminating pod: %s" % (p and p["metadata"]))
    wait_for(lambda: get(sim, "pod", "web") is None, 10, "kubelet removes it")
    # not scheduled: deleted at once
    unsched = json.loads(json.dumps(pod))
    unsched["metadata"]["name"] = "pending"
    del unsched["spec"]["nodeName"]
    sim.apply(unsched)
    sim.kubectl("delete", "pod", "pending", "--wait=false")
    t.check(get(sim, "pod", "pending") is None, "unscheduled pod deleted at once")
    # --grace-period=0 --force: at once
    sim.apply(pod)
    sim.kubectl("delete", "pod", "web", "--grace-period=0", "--force")
    t.check(get(sim, "pod", "web") is None, "forced deletion")


main()

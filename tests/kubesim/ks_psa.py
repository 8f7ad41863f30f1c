"""Pod Security admission for kubesim, modelled on k8s.io/pod-security-admission.

The built-in PodSecurity admission plugin of kube-apiserver, as of v1.32
(the version kubesim reports), with the default configuration: no
exemptions, every mode defaulting to "privileged:latest".  Sources, in
kubernetes/kubernetes staging/src/k8s.io/pod-security-admission:

- api/helpers.go: the namespace labels pod-security.kubernetes.io/<mode> and
  <mode>-version (mode = enforce, audit, warn), ParseLevel, ParseVersion
  ("latest" or "v1.N"), PolicyToEvaluate (an invalid enforce level is
  evaluated as "restricted", an invalid audit or warn level as
  "privileged"); label errors are field errors
  'metadata.labels[KEY]: Invalid value: "V": must be one of ...'.
- policy/check_*.go: every check with its versions, ForbiddenReason and
  ForbiddenDetail texts (joinQuote, pluralize); policy/registry.go: checks
  run baseline IDs first then restricted IDs, each group sorted by ID, and a
  restricted check's OverrideCheckIDs remove the baseline check it replaces
  (restrictedVolumes -> hostPathVolumes, capabilities_restricted ->
  capabilities_baseline, seccompProfile_restricted ->
  seccompProfile_baseline); "latest" and versions past the newest check are
  evaluated as the newest.
- admission/admission.go and response.go: what is checked when.
  * Pods (create, and updates that change containers or images; the
    exec/attach/binding/eviction/log/portforward/proxy/status subresources
    are not checked): enforce violations are refused, 403
    'pods "NAME" is forbidden: violates PodSecurity "LEVEL:VERSION": DETAILS'
    (reason Forbidden, details name/kind "pods"); otherwise warn violations
    become a Warning 'would violate PodSecurity "LEVEL:VERSION": DETAILS'.
  * Workloads with a pod template (Deployment, ReplicaSet, StatefulSet,
    DaemonSet, Job, CronJob, ReplicationController, PodTemplate; not their
    subresources): never refused; warn violations become a Warning. With
    only an enforce label (warn and audit privileged) nothing is said at
    all: the workload is stored and its pods are refused later, by the
    controller's creates.
  * Namespaces: create or update with invalid labels -> 422
    'Namespace "NAME" is invalid: metadata.labels[...]: Invalid value: ...';
    an update to a stricter enforce level checks the namespace's pods and
    answers Warnings 'existing pods in namespace "NS" violate the new
    PodSecurity enforce level "LEVEL:VERSION"' and
    'POD (and N other pods): REASONS'.
  * Audit violations become the audit annotation
    pod-security.kubernetes.io/audit-violations; kubesim has no audit log
    and puts the annotations in the request's log entry ("audit").
  Dry-run requests are admitted like real ones.

Not modelled: exemptions (usernames, runtime classes, namespaces), the
admission configuration file, the 3000-pod / 1 s budget of the namespace
check, and the relaxations behind feature gates that are off in 1.32
(user-namespace pods).
"""

import re
import threading

LEVELS = ("privileged", "baseline", "restricted")
PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LATEST = (1, 10 ** 6)            # "latest": newer than any version
SERVER_MINOR = 32               # kubesim reports v1.32.4

_local = threading.local()


# ---------------------------------------------------------------- per request

def take():
    """-> (warnings, audit annotations) recorded by admission in this thread; clears them."""
    w = getattr(_local, "warnings", None) or []
    a = getattr(_local, "audit", None) or {}
    _local.warnings, _local.audit = [], {}
    return w, a


def warning_header(text):
    """The value of a Warning header as the API server writes it: 299 - "text"."""
    q = "".join("\\" + c if c in '"\\' else c for c in text)
    return '299 - "%s"' % q.encode("latin-1", "replace").decode("latin-1")


def _warn(text):
    if not hasattr(_local, "warnings") or _local.warnings is None:
        _local.warnings = []
    _local.warnings.append(text)


def _audit(key, value):
    if not hasattr(_local, "audit") or _local.audit is None:
        _local.audit = {}
    _local.audit[key] = value


# ---------------------------------------------------------------- helpers

def join_quote(items):
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular, plural, n):
    return singular if n == 1 else plural


def go_quote(s):
    """Go's %q of a string (enough for label and annotation values)."""
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7f:
            out.append("\\x%02x" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _d(obj, *path):
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def _containers(spec):
    """initContainers, containers, ephemeralContainers (policy/visitor.go order)."""
    out = []
    for f in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(f) or []:
            if isinstance(c, dict):
                out.append(c)
    return out


def _name(c):
    return str(c.get("name", ""))


def _sc(c):
    sc = c.get("securityContext")
    return sc if isinstance(sc, dict) else None


def _windows(spec):
    return _d(spec, "os", "name") == "windows"


def _setters(pod_bad, containers):
    s = ["pod"] if pod_bad else []
    if containers:
        s.append("%s %s" % (pluralize("container", "containers", len(containers)), join_quote(containers)))
    return s


# ---------------------------------------------------------------- baseline checks
# Each returns None (allowed) or (ForbiddenReason, ForbiddenDetail).

def app_armor_profile_1_0(meta, spec):
    ok_types = ("RuntimeDefault", "Localhost")
    bad_values = set()
    pod_bad = False
    p = _d(spec, "securityContext", "appArmorProfile")
    if isinstance(p, dict) and p.get("type") not in ok_types:
        pod_bad = True
        bad_values.add(str(p.get("type", "")))
    bad = []
    for c in _containers(spec):
        p = _d(c, "securityContext", "appArmorProfile")
        if isinstance(p, dict) and p.get("type") not in ok_types:
            bad.append(_name(c))
            bad_values.add(str(p.get("type", "")))
    setters = _setters(pod_bad, bad)
    forbidden = []
    for k, v in ((meta or {}).get("annotations") or {}).items():
        if k.startswith("container.apparmor.security.beta.kubernetes.io/"):
            v = str(v)
            if not (v == "" or v == "runtime/default" or v.startswith("localhost/")):
                forbidden.append("%s=%s" % (k, go_quote(v)))
    values = sorted(bad_values)
    if forbidden:
        forbidden.sort()
        values += forbidden
        setters.append(pluralize("annotation", "annotations", len(forbidden)))
    if not setters:
        return None
    return (pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            "%s must not set AppArmor profile type to %s" % (" and ".join(setters), join_quote(values)))


CAPABILITIES_BASELINE = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def capabilities_baseline_1_0(meta, spec):
    bad, caps = [], set()
    for c in _containers(spec):
        add = _d(c, "securityContext", "capabilities", "add")
        if not isinstance(add, list):
            continue
        extra = [str(x) for x in add if str(x) not in CAPABILITIES_BASELINE]
        if extra:
            bad.append(_name(c))
            caps.update(extra)
    if not bad:
        return None
    return ("non-default capabilities",
            "%s %s must not include %s in securityContext.capabilities.add"
            % (pluralize("container", "containers", len(bad)), join_quote(bad), join_quote(sorted(caps))))


def host_namespaces_1_0(meta, spec):
    hn = ["%s=true" % f for f in ("hostNetwork", "hostPID", "hostIPC") if spec.get(f) is True]
    return ("host namespaces", ", ".join(hn)) if hn else None


def host_path_volumes_1_0(meta, spec):
    vols = [str(v.get("name", "")) for v in spec.get("volumes") or [] if isinstance(v, dict) and v.get("hostPath") is not None]
    if not vols:
        return None
    return ("hostPath volumes", "%s %s" % (pluralize("volume", "volumes", len(vols)), join_quote(vols)))


def host_ports_1_0(meta, spec):
    bad, ports = [], set()
    for c in _containers(spec):
        hp = [p.get("hostPort") for p in c.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")]
        if hp:
            bad.append(_name(c))
            ports.update(str(int(x)) for x in hp)
    if not bad:
        return None
    return ("hostPort", "%s %s %s %s %s" % (pluralize("container", "containers", len(bad)), join_quote(bad),
                                             pluralize("uses", "use", len(bad)),
                                             pluralize("hostPort", "hostPorts", len(ports)), ", ".join(sorted(ports))))


def privileged_1_0(meta, spec):
    bad = [_name(c) for c in _containers(spec) if _d(c, "securityContext", "privileged") is True]
    if not bad:
        return None
    return ("privileged", "%s %s must not set securityContext.privileged=true"
            % (pluralize("container", "containers", len(bad)), join_quote(bad)))


def proc_mount_1_0(meta, spec):
    bad, kinds = [], set()
    for c in _containers(spec):
        pm = _d(c, "securityContext", "procMount")
        if pm is not None and pm != "Default":
            bad.append(_name(c))
            kinds.add(str(pm))
    if not bad:
        return None
    return ("procMount", "%s %s must not set securityContext.procMount to %s"
            % (pluralize("container", "containers", len(bad)), join_quote(bad), join_quote(sorted(kinds))))


def _selinux(types):
    def check(meta, spec):
        bad_types, flags = set(), {"user": False, "role": False}

        def valid(o):
            ok = True
            if str(o.get("type", "")) not in types:
                ok = False
                bad_types.add(str(o.get("type", "")))
            for f in ("user", "role"):
                if o.get(f):
                    ok = False
                    flags[f] = True
            return ok
        pod_bad = False
        o = _d(spec, "securityContext", "seLinuxOptions")
        if isinstance(o, dict) and not valid(o):
            pod_bad = True
        bad = []
        for c in _containers(spec):
            o = _d(c, "securityContext", "seLinuxOptions")
            if isinstance(o, dict) and not valid(o):
                bad.append(_name(c))
        setters = _setters(pod_bad, bad)
        if not setters:
            return None
        data = []
        if bad_types:
            data.append("%s %s" % (pluralize("type", "types", len(bad_types)), join_quote(sorted(bad_types))))
        if flags["user"]:
            data.append("user may not be set")
        if flags["role"]:
            data.append("role may not be set")
        return ("seLinuxOptions", "%s set forbidden securityContext.seLinuxOptions: %s"
                % (" and ".join(setters), "; ".join(data)))
    return check


SELINUX_1_0 = {"", "container_t", "container_init_t", "container_kvm_t"}
SELINUX_1_31 = SELINUX_1_0 | {"container_engine_t"}


def _seccomp_annotation_ok(v):
    return v in ("runtime/default", "docker/default") or v.startswith("localhost/")


def seccomp_baseline_1_0(meta, spec):
    ann = (meta or {}).get("annotations") or {}
    bad = set()
    key = "seccomp.security.alpha.kubernetes.io/pod"
    if key in ann and not _seccomp_annotation_ok(str(ann[key])):
        bad.add("%s=%s" % (key, go_quote(str(ann[key]))))
    for c in _containers(spec):
        key = "container.seccomp.security.alpha.kubernetes.io/" + _name(c)
        if key in ann and not _seccomp_annotation_ok(str(ann[key])):
            bad.add("%s=%s" % (key, go_quote(str(ann[key]))))
    if not bad:
        return None
    return ("seccompProfile", "forbidden %s %s" % (pluralize("annotation", "annotations", len(bad)),
                                                   ", ".join(sorted(bad))))


SECCOMP_OK = ("RuntimeDefault", "Localhost")


def seccomp_baseline_1_19(meta, spec):
    bad_values = set()
    pod_bad = False
    p = _d(spec, "securityContext", "seccompProfile")
    if isinstance(p, dict) and p.get("type") not in SECCOMP_OK:
        pod_bad = True
        bad_values.add(str(p.get("type", "")))
    bad = []
    for c in _containers(spec):
        p = _d(c, "securityContext", "seccompProfile")
        if isinstance(p, dict) and p.get("type") not in SECCOMP_OK:
            bad.append(_name(c))
            bad_values.add(str(p.get("type", "")))
    setters = _setters(pod_bad, bad)
    if not setters:
        return None
    return ("seccompProfile", "%s must not set securityContext.seccompProfile.type to %s"
            % (" and ".join(setters), join_quote(sorted(bad_values))))


SYSCTLS_1_0 = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
               "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"}
SYSCTLS_1_27 = SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_1_29 = SYSCTLS_1_27 | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                               "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
SYSCTLS_1_32 = SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}


def _sysctls(allowed):
    def check(meta, spec):
        bad = [str(s.get("name", "")) for s in _d(spec, "securityContext", "sysctls") or []
               if isinstance(s, dict) and str(s.get("name", "")) not in allowed]
        return ("forbidden sysctls", ", ".join(bad)) if bad else None
    return check


def windows_host_process_1_0(meta, spec):
    pod_bad = _d(spec, "securityContext", "windowsOptions", "hostProcess") is True
    bad = [_name(c) for c in _containers(spec) if _d(c, "securityContext", "windowsOptions", "hostProcess") is True]
    setters = _setters(pod_bad, bad)
    if not setters:
        return None
    return ("hostProcess", "%s must not set securityContext.windowsOptions.hostProcess=true" % " and ".join(setters))


# ---------------------------------------------------------------- restricted checks

def allow_privilege_escalation_1_8(meta, spec):
    bad = [_name(c) for c in _containers(spec) if _d(c, "securityContext", "allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return ("allowPrivilegeEscalation != false", "%s %s must set securityContext.allowPrivilegeEscalation=false"
            % (pluralize("container", "containers", len(bad)), join_quote(bad)))


def _unless_windows(fn):
    """The v1.25 revision of a restricted check: pods with spec.os.name windows pass."""
    def check(meta, spec):
        return None if _windows(spec) else fn(meta, spec)
    return check


def capabilities_restricted_1_22(meta, spec):
    missing, adding, caps = [], [], set()
    for c in _containers(spec):
        cp = _d(c, "securityContext", "capabilities")
        if not isinstance(cp, dict):
            missing.append(_name(c))
            continue
        if "ALL" not in [str(x) for x in cp.get("drop") or []]:
            missing.append(_name(c))
        extra = [str(x) for x in cp.get("add") or [] if str(x) != "NET_BIND_SERVICE"]
        if extra:
            adding.append(_name(c))
            caps.update(extra)
    details = []
    if missing:
        details.append('%s %s must set securityContext.capabilities.drop=["ALL"]'
                       % (pluralize("container", "containers", len(missing)), join_quote(missing)))
    if adding:
        details.append("%s %s must not include %s in securityContext.capabilities.add"
                       % (pluralize("container", "containers", len(adding)), join_quote(adding), join_quote(sorted(caps))))
    return ("unrestricted capabilities", "; ".join(details)) if details else None


ALLOWED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret")
RESTRICTED_VOLUME_TYPES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
                           "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
                           "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
                           "scaleIO", "storageos")


def restricted_volumes_1_0(meta, spec):
    bad, types = [], set()
    for v in spec.get("volumes") or []:
        if not isinstance(v, dict) or any(v.get(k) is not None for k in ALLOWED_VOLUMES):
            continue
        bad.append(str(v.get("name", "")))
        types.add(next((t for t in RESTRICTED_VOLUME_TYPES if v.get(t) is not None), "unknown"))
    if not bad:
        return None
    return ("restricted volume types", "%s %s %s %s %s" % (
        pluralize("volume", "volumes", len(bad)), join_quote(bad), pluralize("uses", "use", len(bad)),
        pluralize("restricted volume type", "restricted volume types", len(types)), join_quote(sorted(types))))


def run_as_non_root_1_0(meta, spec):
    pod_bad, pod_ok = False, False
    v = _d(spec, "securityContext", "runAsNonRoot")
    if v is not None:
        if v is False:
            pod_bad = True
        else:
            pod_ok = True
    explicit, implicit = [], []
    for c in _containers(spec):
        own = _d(c, "securityContext", "runAsNonRoot")
        if own is not None:
            if own is False:
                explicit.append(_name(c))
        elif not pod_ok:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("runAsNonRoot != true", "%s must not set securityContext.runAsNonRoot=false" % " and ".join(setters))
    if implicit:
        return ("runAsNonRoot != true", "pod or %s %s must set securityContext.runAsNonRoot=true"
                % (pluralize("container", "containers", len(implicit)), join_quote(implicit)))
    return None


def run_as_user_1_23(meta, spec):
    pod_bad = _d(spec, "securityContext", "runAsUser") == 0
    bad = [_name(c) for c in _containers(spec) if _d(c, "securityContext", "runAsUser") == 0]
    setters = _setters(pod_bad, bad)
    if not setters:
        return None
    return ("runAsUser=0", "%s must not set runAsUser=0" % " and ".join(setters))


def seccomp_restricted_1_19(meta, spec):
    bad_values = set()
    pod_bad, pod_set = False, False
    p = _d(spec, "securityContext", "seccompProfile")
    if isinstance(p, dict):
        if p.get("type") not in SECCOMP_OK:
            pod_bad = True
            bad_values.add(str(p.get("type", "")))
        else:
            pod_set = True
    explicit, implicit = [], []
    for c in _containers(spec):
        p = _d(c, "securityContext", "seccompProfile")
        if isinstance(p, dict):
            if p.get("type") not in SECCOMP_OK:
                explicit.append(_name(c))
                bad_values.add(str(p.get("type", "")))
        elif not pod_set:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("seccompProfile", "%s must not set securityContext.seccompProfile.type to %s"
                % (" and ".join(setters), join_quote(sorted(bad_values))))
    if implicit:
        return ("seccompProfile", 'pod or %s %s must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'
                % (pluralize("container", "containers", len(implicit)), join_quote(implicit)))
    return None


# ---------------------------------------------------------------- the registry
# (id, level, [(minimum minor version, fn)], override ids)

CHECKS = [
    ("appArmorProfile", "baseline", [(0, app_armor_profile_1_0)], ()),
    ("capabilities_baseline", "baseline", [(0, capabilities_baseline_1_0)], ()),
    ("hostNamespaces", "baseline", [(0, host_namespaces_1_0)], ()),
    ("hostPathVolumes", "baseline", [(0, host_path_volumes_1_0)], ()),
    ("hostPorts", "baseline", [(0, host_ports_1_0)], ()),
    ("privileged", "baseline", [(0, privileged_1_0)], ()),
    ("procMount", "baseline", [(0, proc_mount_1_0)], ()),
    ("seLinuxOptions", "baseline", [(0, _selinux(SELINUX_1_0)), (31, _selinux(SELINUX_1_31))], ()),
    ("seccompProfile_baseline", "baseline", [(0, seccomp_baseline_1_0), (19, seccomp_baseline_1_19)], ()),
    ("sysctls", "baseline", [(0, _sysctls(SYSCTLS_1_0)), (27, _sysctls(SYSCTLS_1_27)),
                             (29, _sysctls(SYSCTLS_1_29)), (32, _sysctls(SYSCTLS_1_32))], ()),
    ("windowsHostProcess", "baseline", [(0, windows_host_process_1_0)], ()),
    ("allowPrivilegeEscalation", "restricted",
     [(8, allow_privilege_escalation_1_8), (25, _unless_windows(allow_privilege_escalation_1_8))], ()),
    ("capabilities_restricted", "restricted",
     [(22, capabilities_restricted_1_22), (25, _unless_windows(capabilities_restricted_1_22))],
     ("capabilities_baseline",)),
    ("restrictedVolumes", "restricted", [(0, restricted_volumes_1_0)], ("hostPathVolumes",)),
    ("runAsNonRoot", "restricted", [(0, run_as_non_root_1_0)], ()),
    ("runAsUser", "restricted", [(23, run_as_user_1_23)], ()),
    ("seccompProfile_restricted", "restricted",
     [(19, seccomp_restricted_1_19), (25, _unless_windows(seccomp_restricted_1_19))],
     ("seccompProfile_baseline",)),
]
MAX_MINOR = max(v for _, _, vs, _ in CHECKS for v, _ in vs)


def _at(versions, minor):
    fn = None
    for v, f in versions:
        if v <= minor:
            fn = f
    return fn


def evaluate(level, version, meta, spec):
    """-> [(reason, detail)] of the failed checks, in the registry's order."""
    if level == "privileged":
        return []
    minor = MAX_MINOR if version == LATEST or version[1] > MAX_MINOR else version[1]
    base = sorted(c for c in CHECKS if c[1] == "baseline")
    restr = sorted(c for c in CHECKS if c[1] == "restricted")
    active_restr = [(cid, _at(vs, minor), ov) for cid, _, vs, ov in restr if _at(vs, minor)]
    overridden = set()
    if level == "restricted":
        for _, _, ov in active_restr:
            overridden.update(ov)
    fns = [_at(vs, minor) for cid, _, vs, _ in base if cid not in overridden and _at(vs, minor)]
    if level == "restricted":
        fns += [fn for _, fn, _ in active_restr]
    out = []
    for fn in fns:
        r = fn(meta or {}, spec if isinstance(spec, dict) else {})
        if r is not None:
            out.append(r)
    return out


def detail(results):
    """AggregateCheckResult.ForbiddenDetail()."""
    return ", ".join("%s (%s)" % (r, d) if d else r for r, d in results)


# ---------------------------------------------------------------- policy

def _level_version_str(lv):
    level, version = lv
    return "%s:%s" % (level, "latest" if version == LATEST else "v%d.%d" % version)


def policy_of(labels):
    """api.PolicyToEvaluate with privileged:latest defaults -> ({mode: (level, version)}, [(key, value, msg)])."""
    labels = labels or {}
    pol = {m: ["privileged", LATEST] for m in MODES}
    errs = []
    for m in MODES:
        key = PREFIX + m
        if key in labels:
            v = str(labels[key])
            if v in LEVELS:
                pol[m][0] = v
            else:
                errs.append((key, v, "must be one of privileged, baseline, restricted"))
                pol[m][0] = "restricted" if m == "enforce" else "privileged"
        key = PREFIX + m + "-version"
        if key in labels:
            v = str(labels[key])
            ver = _parse_version(v)
            if ver is None:
                errs.append((key, v, 'must be "latest" or "v1.x"'))
                ver = LATEST
            pol[m][1] = ver
    # api.PolicyToEvaluate appends errors enforce level, enforce version, audit..., warn...
    return {m: tuple(v) for m, v in pol.items()}, errs


def _parse_version(v):
    if v == "latest":
        return LATEST
    m = re.match(r"^v1\.([0-9]|[1-9][0-9]*)$", v)
    return (1, int(m.group(1))) if m else None


def _invalid_labels(name, errs):
    from ks_core import ApiError
    msgs = ["metadata.labels[%s]: Invalid value: %s: %s" % (k, go_quote(v), m) for k, v, m in errs]
    agg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    causes = [{"reason": "FieldValueInvalid", "message": "Invalid value: %s: %s" % (go_quote(v), m),
               "field": "metadata.labels[%s]" % k} for k, v, m in errs]
    return ApiError(422, "Invalid", 'Namespace "%s" is invalid: %s' % (name, agg),
                    {"name": name, "kind": "Namespace", "causes": causes})


# ---------------------------------------------------------------- pod specs

POD_CONTROLLERS = {("", "ReplicationController"), ("", "PodTemplate"), ("apps", "ReplicaSet"),
                   ("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
                   ("batch", "Job"), ("batch", "CronJob")}
POD_IGNORED_SUBRESOURCES = {"exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"}


def _template_of(rt, obj):
    """-> (metadata, spec) of the pod template, or None when there is none."""
    if rt.kind == "PodTemplate":
        t = obj.get("template")
    elif rt.kind == "CronJob":
        t = _d(obj, "spec", "jobTemplate", "spec", "template")
    else:
        t = _d(obj, "spec", "template")
    if not isinstance(t, dict):
        return None
    return t.get("metadata") or {}, t.get("spec") or {}


def _significant_pod_update(new, old):
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    na = _d(new, "metadata", "annotations") or {}
    oa = _d(old, "metadata", "annotations") or {}

    def sig(c, oc):
        if c.get("image") != oc.get("image"):
            return True
        k = "container.seccomp.security.alpha.kubernetes.io/" + _name(c)
        return na.get(k) != oa.get(k)
    for f in ("containers", "initContainers"):
        a, b = ns.get(f) or [], os_.get(f) or []
        if len(a) != len(b):
            return True
        if any(sig(c, oc) for c, oc in zip(a, b) if isinstance(c, dict) and isinstance(oc, dict)):
            return True
    olds = {_name(c): c for c in os_.get("ephemeralContainers") or [] if isinstance(c, dict)}
    for c in ns.get("ephemeralContainers") or []:
        if not isinstance(c, dict):
            continue
        oc = olds.get(_name(c))
        if oc is None or sig(c, oc):
            return True
    return False


# ---------------------------------------------------------------- admission

class PodSecurity:
    def __init__(self, sim):
        self.sim = sim

    def _ns_labels(self, ns):
        from ks_core import loads
        e = self.sim.stores[("", "namespaces")].objs.get(("", ns))
        return (_d(loads(e[0]), "metadata", "labels") or {}) if e is not None else {}

    def admit(self, rt, ns, new, old, sub):
        """Called by the store under its lock before a create/update commits; raises ApiError to refuse."""
        if rt.group == "" and rt.kind == "Namespace":
            return self._namespace(new, old, sub)
        if rt.group == "" and rt.kind == "Pod":
            return self._pod(ns, new, old, sub)
        if (rt.group, rt.kind) in POD_CONTROLLERS and not sub:
            tpl = _template_of(rt, new)
            if tpl is not None:
                self._evaluate(ns, tpl[0], tpl[1], None)

    def _namespace(self, new, old, sub):
        if sub:
            return
        name = _d(new, "metadata", "name") or ""
        pol, errs = policy_of(_d(new, "metadata", "labels"))
        if old is None:
            if errs:
                raise _invalid_labels(name, errs)
            return
        opol, oerrs = policy_of(_d(old, "metadata", "labels"))
        if errs and (not oerrs or errs != oerrs):
            raise _invalid_labels(name, errs)
        ne, oe = pol["enforce"], opol["enforce"]
        if ne == oe or ne[0] == "privileged":
            return
        if ne[1] == oe[1] and LEVELS.index(ne[0]) <= LEVELS.index(oe[0]):
            return
        for w in self._check_pods(name, ne):
            _warn(w)

    def _check_pods(self, ns, enforce):
        from ks_core import loads
        st = self.sim.stores[("", "pods")]
        lo, hi = st.ns_range(ns)
        counts, order = {}, []
        for k in st.keys[lo:hi]:
            pod = loads(st.objs[k][0])
            res = evaluate(enforce[0], enforce[1], pod.get("metadata"), pod.get("spec") or {})
            if not res:
                continue
            reason = ", ".join(r for r, _ in res)
            pname = _d(pod, "metadata", "name") or ""
            if reason not in counts:
                counts[reason] = [pname, 0]
                order.append(reason)
            elif pname < counts[reason][0]:
                counts[reason][0] = pname
            counts[reason][1] += 1
        if not order:
            return []
        out = ['existing pods in namespace %s violate the new PodSecurity enforce level %s'
               % (go_quote(ns), go_quote(_level_version_str(enforce)))]
        pods = []
        for reason in order:
            first, n = counts[reason]
            if n == 1:
                pods.append("%s: %s" % (first, reason))
            elif n == 2:
                pods.append("%s (and 1 other pod): %s" % (first, reason))
            else:
                pods.append("%s (and %d other pods): %s" % (first, n - 1, reason))
        return out + sorted(pods)

    def _pod(self, ns, new, old, sub):
        if sub in POD_IGNORED_SUBRESOURCES:
            return
        pol, errs = policy_of(self._ns_labels(ns))
        if not errs and all(pol[m][0] == "privileged" for m in MODES):
            return
        if old is not None and not _significant_pod_update(new, old):
            return
        self._evaluate(ns, new.get("metadata") or {}, new.get("spec") or {}, _d(new, "metadata", "name") or "",
                       enforce=True)

    def _evaluate(self, ns, meta, spec, pod_name, enforce=False):
        """EvaluatePod: enforce (pods only), then audit, then warn when allowed."""
        from ks_core import ApiError
        labels = self._ns_labels(ns)
        pol, errs = policy_of(labels)
        if not enforce and not errs and pol["warn"][0] == "privileged" and pol["audit"][0] == "privileged":
            return
        cache = {}

        def run(lv):
            if lv not in cache:
                cache[lv] = evaluate(lv[0], lv[1], meta, spec)
            return cache[lv]
        if enforce:
            _audit("pod-security.kubernetes.io/enforce-policy", _level_version_str(pol["enforce"]))
        refused = None
        if enforce:
            res = run(pol["enforce"])
            if res:
                refused = ApiError(403, "Forbidden", 'pods "%s" is forbidden: violates PodSecurity %s: %s'
                                   % (pod_name, go_quote(_level_version_str(pol["enforce"])), detail(res)),
                                   {"name": pod_name, "kind": "pods"})
        res = run(pol["audit"])
        if res:
            _audit("pod-security.kubernetes.io/audit-violations", "would violate PodSecurity %s: %s"
                   % (go_quote(_level_version_str(pol["audit"])), detail(res)))
        if refused is not None:
            raise refused
        res = run(pol["warn"])
        if res:
            _warn("would violate PodSecurity %s: %s" % (go_quote(_level_version_str(pol["warn"])), detail(res)))


def install(sim):
    """Put Pod Security admission in sim's create/update path (Sim.psa_hook)."""
    sim.psa_hook = PodSecurity(sim).admit
    return sim.psa_hook

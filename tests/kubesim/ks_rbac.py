"""RBAC authorization for ServiceAccount tokens, as kube-apiserver does it.

A token whose NAME is `system:serviceaccount:<ns>:<sa>` is a restricted user:
its requests are authorized against the Roles, ClusterRoles and bindings
stored in kubesim at request time (k8s.io/apiserver RequestInfoFactory for
the attributes, plugin/pkg/auth/authorizer/rbac for the rule resolution and
matching, endpoints/handlers/responsewriters for the 403 body). Every other
token is all-powerful (a cluster admin). The built-in discovery bindings
(system:discovery, system:public-info-viewer, system:basic-user) are implied,
not stored, so lists of ClusterRoles stay as tests create them.

Writes of Roles/ClusterRoles and bindings by a restricted user go through
the escalation check of the RBAC registry: allowed with `escalate` (roles) or
`bind` (on the referenced role), or when the user already holds every
permission granted."""

import threading

from ks_core import ApiError, loads

RBAC_GROUP = "rbac.authorization.k8s.io"
SA_PREFIX = "system:serviceaccount:"
TRUE_VALUES = ("1", "t", "T", "TRUE", "true", "True")
NS_SUBRESOURCES = ("status", "finalize")

# The built-in ClusterRoles bound to system:authenticated (bootstrap policy).
BUILTIN_RULES = [
    # system:discovery
    {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                                           "/openapi/*", "/readyz", "/version", "/version/"]},
    # system:public-info-viewer
    {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]},
    # system:basic-user
    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
]


class User:
    __slots__ = ("name", "groups", "sa_ns", "sa_name")

    def __init__(self, name):
        self.name = name
        ns, sa = name[len(SA_PREFIX):].split(":", 1)
        self.sa_ns, self.sa_name = ns, sa
        self.groups = ["system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"]


def user_for(token_name):
    """The restricted user a token NAME stands for, or None (all-powerful)."""
    if not token_name or not token_name.startswith(SA_PREFIX):
        return None
    rest = token_name[len(SA_PREFIX):].split(":")
    if len(rest) != 2 or not all(rest):
        return None
    return User(token_name)


class Attrs:
    """authorizer.Attributes of one request."""
    __slots__ = ("resource_request", "verb", "group", "resource", "subresource", "name", "namespace", "path")

    def __init__(self, verb, path, resource_request=False, group="", resource="", subresource="", name="",
                 namespace=""):
        self.verb = verb
        self.path = path
        self.resource_request = resource_request
        self.group = group
        self.resource = resource
        self.subresource = subresource
        self.name = name
        self.namespace = namespace


def _name_from_field_selector(fs):
    """fields.Selector.RequiresExactMatch("metadata.name")."""
    for term in (fs or "").split(","):
        if "!=" in term:
            continue
        sep = "==" if "==" in term else "=" if "=" in term else None
        if sep is None:
            continue
        k, v = term.split(sep, 1)
        if k.strip() == "metadata.name":
            return v.strip()
    return None


def request_attrs(method, path, q):
    """k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory.NewRequestInfo."""
    verb = method.lower()
    parts = [p for p in path.strip("/").split("/")]
    if parts == [""]:
        parts = []
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return Attrs(verb, path)
    prefix, cur = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(cur) < 3:
            return Attrs(verb, path)
        group, cur = cur[0], cur[1:]
    cur = cur[1:]                       # version
    via_method = False
    if cur[0] in ("proxy", "watch"):
        if len(cur) < 2:
            return Attrs(verb, path)    # the real server answers 404 here
        verb = cur[0]
        cur = cur[1:]
    else:
        via_method = True
        verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(method, "")
    namespace = ""
    if cur[0] == "namespaces":
        if len(cur) > 1:
            namespace = cur[1]
            if len(cur) > 2 and cur[2] not in NS_SUBRESOURCES:
                cur = cur[2:]
    resource = cur[0]
    name = cur[1] if len(cur) >= 2 else ""
    sub = cur[2] if len(cur) >= 3 and verb != "proxy" else ""
    if via_method and not name and verb == "get":
        verb = "watch" if q.get("watch") in TRUE_VALUES else "list"
        n = _name_from_field_selector(q.get("fieldSelector"))
        if n and "/" not in n and "%" not in n and n not in (".", ".."):
            name = n
    if via_method and not name and verb == "delete":
        verb = "deletecollection"
    return Attrs(verb, path, True, group, resource, sub, name, namespace)


# ------------------------------------------------------------------ rules
class Rule:
    __slots__ = ("verbs", "groups", "resources", "names", "urls", "src")

    def __init__(self, r):
        self.src = r
        self.verbs = frozenset(r.get("verbs") or ())
        self.groups = frozenset(r.get("apiGroups") or ())
        self.resources = tuple(r.get("resources") or ())
        self.names = frozenset(r.get("resourceNames") or ())
        self.urls = tuple(r.get("nonResourceURLs") or ())

    def verb_ok(self, verb):
        return "*" in self.verbs or verb in self.verbs

    def resource_ok(self, resource, sub):
        combined = resource + "/" + sub if sub else resource
        for rr in self.resources:
            if rr == "*" or rr == combined:
                return True
            if sub and len(rr) == len(sub) + 2 and rr.startswith("*/") and rr.endswith(sub):
                return True
        return False

    def allows(self, a):
        if not self.verb_ok(a.verb):
            return False
        if not a.resource_request:
            for u in self.urls:
                if u == "*" or u == a.path or (u.endswith("*") and a.path.startswith(u[:-1])):
                    return True
            return False
        return (("*" in self.groups or a.group in self.groups) and self.resource_ok(a.resource, a.subresource)
                and (not self.names or a.name in self.names))


BUILTIN = [Rule(r) for r in BUILTIN_RULES]


def _applies(user, subjects, binding_ns):
    """rbac.appliesTo."""
    for s in subjects or ():
        if not isinstance(s, dict):
            continue
        kind, name = s.get("kind"), s.get("name")
        if kind == "User":
            if name == user.name:
                return True
        elif kind == "Group":
            if name in user.groups:
                return True
        elif kind == "ServiceAccount":
            ns = s.get("namespace") or binding_ns
            if ns and SA_PREFIX + ns + ":" + (name or "") == user.name:
                return True
    return False


def _compact(r):
    """rbacv1helpers.CompactString."""
    def q(xs):
        return "[" + " ".join('"%s"' % x for x in xs) + "]"
    parts = []
    for key, label in (("apiGroups", "APIGroups"), ("resources", "Resources"), ("nonResourceURLs", "NonResourceURLs"),
                       ("resourceNames", "ResourceNames"), ("verbs", "Verbs")):
        if r.get(key):
            parts.append("%s:%s" % (label, q(r[key])))
    return "{" + ", ".join(parts) + "}"


class Authorizer:
    def __init__(self, sim):
        self.sim = sim
        self.cache = {}                 # (user name, namespace) -> (rbac generation, [Rule], [error])
        self.cache_lock = threading.Lock()
        self.local = threading.local()
        sim.admit_hook = self.admit

    # ------------------------------------------------------------ resolution
    def _role_rules(self, kind, name, ns):
        """-> (rules list or None, error or None)."""
        if kind == "ClusterRole":
            e = self.sim.stores[(RBAC_GROUP, "clusterroles")].objs.get(("", name))
            what = 'clusterrole.rbac.authorization.k8s.io "%s" not found' % name
        elif kind == "Role":
            e = self.sim.stores[(RBAC_GROUP, "roles")].objs.get((ns, name))
            what = 'role.rbac.authorization.k8s.io "%s" not found' % name
        else:
            return None, 'unsupported role reference kind: "%s"' % kind
        if e is None:
            return None, what
        return loads(e[0]).get("rules") or [], None

    def rules_for(self, user, ns):
        """(compiled rules, resolution errors) of user in namespace ns ("" = cluster scope)."""
        sim = self.sim
        key = (user.name, ns)
        gen = sim.rbac_gen
        c = self.cache.get(key)
        if c is not None and c[0] == gen:
            return c[1], c[2]
        rules, errors = list(BUILTIN), []
        with sim.lock:
            gen = sim.rbac_gen
            crbs = sim.stores[(RBAC_GROUP, "clusterrolebindings")]
            for k in sorted(crbs.objs):
                b = loads(crbs.objs[k][0])
                if not _applies(user, b.get("subjects"), ""):
                    continue
                ref = b.get("roleRef") or {}
                rr, err = self._role_rules(ref.get("kind"), ref.get("name"), "")
                if err:
                    errors.append(err)
                else:
                    rules.extend(Rule(r) for r in rr if isinstance(r, dict))
            if ns:
                rbs = sim.stores[(RBAC_GROUP, "rolebindings")]
                lo, hi = rbs.ns_range(ns)
                for k in rbs.keys[lo:hi]:
                    b = loads(rbs.objs[k][0])
                    if not _applies(user, b.get("subjects"), ns):
                        continue
                    ref = b.get("roleRef") or {}
                    rr, err = self._role_rules(ref.get("kind"), ref.get("name"), ns)
                    if err:
                        errors.append(err)
                    else:
                        rules.extend(Rule(r) for r in rr if isinstance(r, dict))
        with self.cache_lock:
            if len(self.cache) > 10000:
                self.cache.clear()
            self.cache[key] = (gen, rules, errors)
        return rules, errors

    def allowed(self, user, a):
        rules, errors = self.rules_for(user, a.namespace if a.resource_request else "")
        for r in rules:
            if r.allows(a):
                return True, errors
        return False, errors

    # ------------------------------------------------------------ the filter
    def authorize(self, user, method, path, q):
        """Raise the 403 kube-apiserver answers when user may not make this request."""
        a = request_attrs(method, path, q)
        ok, errors = self.allowed(user, a)
        if ok:
            return
        raise forbidden(user, a, errors)

    def sa_exists(self, user):
        st = self.sim.stores.get(("", "serviceaccounts"))
        return st is not None and (user.sa_ns, user.sa_name) in st.objs

    # ------------------------------------------------------------ escalation
    def set_user(self, user):
        self.local.user = user

    def admit(self, rt, ns, new, old):
        """RBAC registry escalation check for a write of Role/ClusterRole/RoleBinding/ClusterRoleBinding."""
        user = getattr(self.local, "user", None)
        if user is None:
            return
        ns = ns or ""
        name = (new.get("metadata") or {}).get("name", "")
        if rt.kind in ("Role", "ClusterRole"):
            if old is not None and (old.get("rules") or []) == (new.get("rules") or []):
                return
            a = Attrs("escalate", "", True, RBAC_GROUP, rt.plural, "", name if old is not None else "", ns)
            if self.allowed(user, a)[0]:
                return
            self._confirm_no_escalation(user, rt, ns, name, new.get("rules") or [])
        elif rt.kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = new.get("roleRef") or {}
            if old is not None and (old.get("roleRef") or {}) == ref:
                return
            res = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            a = Attrs("bind", "", True, ref.get("apiGroup") or "", res, "", ref.get("name") or "", ns)
            if self.allowed(user, a)[0]:
                return
            rr, err = self._role_rules(ref.get("kind"), ref.get("name"), ns)
            if err:
                raise ApiError(404, "NotFound", err, {"name": ref.get("name"), "group": RBAC_GROUP,
                                                      "kind": res[:-1]})
            self._confirm_no_escalation(user, rt, ns, name, rr)

    def _confirm_no_escalation(self, user, rt, ns, name, rules):
        owner, errors = self.rules_for(user, ns)
        missing = []
        for r in rules:
            if not isinstance(r, dict):
                continue
            for sub in _subrules(r):
                if not any(_covers(o.src, sub) for o in owner):
                    missing.append(_compact(sub))
        if not missing:
            return
        msg = 'user "%s" (groups=[%s]) is attempting to grant RBAC permissions not currently held:\n%s' % (
            user.name, " ".join('"%s"' % g for g in user.groups), "\n".join(sorted(set(missing))))
        if errors:
            msg += "; resolution errors: [%s]" % ", ".join(errors)
        gr = rt.plural + "." + RBAC_GROUP
        details = {"name": name, "group": RBAC_GROUP, "kind": rt.plural}
        raise ApiError(403, "Forbidden", '%s "%s" is forbidden: %s' % (gr, name, msg), details)


def _subrules(r):
    """validation.BreakdownRule: one rule per (group, resource, verb[, name]) or (url, verb)."""
    out = []
    for g in r.get("apiGroups") or []:
        for res in r.get("resources") or []:
            for v in r.get("verbs") or []:
                names = r.get("resourceNames") or []
                if names:
                    for n in names:
                        out.append({"apiGroups": [g], "resources": [res], "resourceNames": [n], "verbs": [v]})
                else:
                    out.append({"apiGroups": [g], "resources": [res], "verbs": [v]})
    for u in r.get("nonResourceURLs") or []:
        for v in r.get("verbs") or []:
            out.append({"nonResourceURLs": [u], "verbs": [v]})
    return out


def _covers(owner, sub):
    """validation.ruleCovers for one broken-down rule."""
    ov = owner.get("verbs") or []
    if "*" not in ov and sub["verbs"][0] not in ov:
        return False
    if "nonResourceURLs" in sub:
        u = sub["nonResourceURLs"][0]
        for ou in owner.get("nonResourceURLs") or []:
            if ou == "*" or ou == u or (ou.endswith("*") and u.startswith(ou[:-1])):
                return True
        return False
    og = owner.get("apiGroups") or []
    if "*" not in og and sub["apiGroups"][0] not in og:
        return False
    ores = owner.get("resources") or []
    res = sub["resources"][0]
    ok = "*" in ores or res in ores
    if not ok and "/" in res:
        ok = "*/" + res.split("/", 1)[1] in ores
    if not ok:
        return False
    onames = owner.get("resourceNames") or []
    if not onames:
        return True
    return bool(sub.get("resourceNames")) and sub["resourceNames"][0] in onames


def forbidden(user, a, errors=()):
    """responsewriters.Forbidden: the Status kube-apiserver writes for a denied request."""
    if not a.resource_request:
        msg = 'User "%s" cannot %s path "%s"' % (user.name, a.verb, a.path)
    else:
        res = a.resource + "/" + a.subresource if a.subresource else a.resource
        if a.namespace:
            msg = 'User "%s" cannot %s resource "%s" in API group "%s" in the namespace "%s"' % (
                user.name, a.verb, res, a.group, a.namespace)
        else:
            msg = 'User "%s" cannot %s resource "%s" in API group "%s" at the cluster scope' % (
                user.name, a.verb, res, a.group)
    if errors:
        msg += ": RBAC: " + (errors[0] if len(errors) == 1 else "[%s]" % ", ".join(errors))
    details = {}
    if a.resource_request:
        gr = a.resource + "." + a.group if a.group else a.resource
        if a.name:
            details["name"] = a.name
            message = '%s "%s" is forbidden: %s' % (gr, a.name, msg)
        else:
            message = "%s is forbidden: %s" % (gr, msg)
        if a.group:
            details["group"] = a.group
        if a.resource:
            details["kind"] = a.resource
    else:
        message = "forbidden: " + msg
    return ApiError(403, "Forbidden", message, details, [("X-Content-Type-Options", "nosniff")])

"""cairntest: the small frame every cairn integration test is written in.

A test file defines cases and calls main():

    from cairntest import case, main, Kubesim, cairn
    @case
    def backup_lists_items(t):
        sim = t.kubesim()
        ...
        t.check(x == y, "what went wrong")
    main()

main() runs each case in order and prints `PASS: <file>:<case>` or
`FAIL: <file>:<case>: <why>` (tests/run.sh counts those lines); a case
marked `@case(xfail="#N: the bug")` prints `XFAIL:` when it fails and
`XPASS:` (counted as a failure) when it passes. Every
process a case starts is killed when the case ends, pass or fail. Each case
gets its own directory under $CAIRN_TMP. Standard library only.
"""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

SRCDIR = os.environ.get("CAIRN_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILDDIR = os.environ.get("CAIRN_BUILDDIR") or SRCDIR
BIN = os.environ.get("CAIRN_BIN") or os.path.join(BUILDDIR, "cairn")
TMP = os.environ.get("CAIRN_TMP") or os.path.join("/tmp", "cairn-test-%d" % os.getpid())
os.makedirs(TMP, exist_ok=True)


class Skip(Exception):
    """Raised by t.skip(): the case cannot run here (printed as SKIP)."""


class CheckFailed(AssertionError):
    pass


def free_port():
    """A free TCP port on 127.0.0.1 (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vmhwm_kib(pid):
    """Peak resident set size (VmHWM) of a running process, KiB; 0 if unknown."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def wait_for(pred, timeout=10.0, what="condition", interval=0.05):
    """Poll pred() until it returns a true value; return it, or raise."""
    end = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < end:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - reported below
            last_exc = e
        time.sleep(interval)
    raise CheckFailed("timed out after %.1fs waiting for %s%s" % (
        timeout, what, (" (last error: %r)" % last_exc) if last_exc else ""))


class Proc:
    """A child process in its own process group with its output in a file."""

    def __init__(self, argv, log, env=None, cwd=None, stdin=None):
        self.argv = [str(a) for a in argv]
        self.log = log
        self._logf = open(log, "ab")
        full_env = dict(os.environ)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        self.p = subprocess.Popen(self.argv, stdout=self._logf, stderr=subprocess.STDOUT,
                                  stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                  env=full_env, cwd=cwd, start_new_session=True)
        self.pid = self.p.pid

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill9(self):
        """SIGKILL the whole group, as a crash would, and reap it."""
        self.signal(signal.SIGKILL)
        self.p.wait()

    def stop(self, timeout=10.0):
        """SIGTERM, wait, then SIGKILL. Returns the exit code."""
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._logf.close()
        return self.p.returncode

    def wait(self, timeout=None):
        return self.p.wait(timeout)

    def output(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")


class Kubesim:
    """tests/kubesim started on a random port (contract of its command line)."""

    def __init__(self, t, tls=True, tokens=None, seeds=(), name="kubesim", extra=(), controllers=True,
                 continue_ttl=None, namespace_delete_seconds=None, pod_delete_seconds=None,
                 client_certs=(), exec_users=()):
        """A strict kubesim by default. A test that needs a kinder world says so:
        controllers=False (no namespace/pod/job/PV controllers: deletes at once,
        no binder) or a list such as "namespace,pv"; continue_ttl seconds
        (default 300); namespace_delete_seconds / pod_delete_seconds (default 2).
        client_certs: user names ("NAME" or "NAME=GROUP,...") that get a client
        certificate from kubesim's CA (a k3s-style kubeconfig); exec_users:
        names (or (name, ttl seconds)) whose kubeconfig user runs the
        exec_credential.py plugin. Contexts: the first user is `kubesim`,
        every other `kubesim-NAME` (kubeconfig_for)."""
        self.dir = t.mkdir(name)
        ready = os.path.join(self.dir, "ready")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        if tokens is None:
            tokens = {"admin": "admin-token"} if tls and not client_certs and not exec_users else {}
        self.tokens = dict(tokens)
        execs = [(e, None) if isinstance(e, str) else tuple(e) for e in exec_users]
        self.users = (list(self.tokens) + [c.split("=", 1)[0] for c in client_certs] + [n for n, _ in execs])
        argv = [sys.executable, os.path.join(SRCDIR, "tests/kubesim/kubesim.py"),
                "--port", "0", "--ready-file", ready, "--kubeconfig-out", self.kubeconfig]
        if tls:
            argv.append("--tls")
        for k, v in self.tokens.items():
            argv += ["--token", "%s=%s" % (k, v)]
        for c in client_certs:
            argv += ["--client-cert", c]
        for n, ttl in execs:
            argv += ["--exec-user", n if ttl is None else "%s=%s" % (n, ttl)]
        for s in seeds:
            argv += ["--seed", s]
        if controllers is not True:
            argv += ["--controllers", "none" if not controllers else
                     controllers if isinstance(controllers, str) else ",".join(controllers)]
        for flag, v in (("--continue-ttl", continue_ttl), ("--namespace-delete-seconds", namespace_delete_seconds),
                        ("--pod-delete-seconds", pod_delete_seconds)):
            if v is not None:
                argv += [flag, str(v)]
        argv += list(extra)
        self.proc = t.spawn(argv, name=name)
        wait_for(lambda: os.path.exists(ready) or not self.proc.alive(), 30, "kubesim ready file")
        if not self.proc.alive():
            raise CheckFailed("kubesim exited: %s" % self.proc.output()[-2000:])
        with open(ready) as f:
            self.url = f.read().strip()
        self.token = next(iter(self.tokens.values()), None)
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname = False
        self._ctx.verify_mode = ssl.CERT_NONE
        if client_certs and not self.token:
            self._load_client_cert()
        self.cache_dir = os.path.join(self.dir, "kubectl-cache")

    def _load_client_cert(self):
        """request() authenticates with the first client certificate of the kubeconfig."""
        import base64
        import re
        with open(self.kubeconfig) as f:
            text = f.read()
        crt = re.search(r"client-certificate-data: (\S+)", text).group(1)
        key = re.search(r"client-key-data: (\S+)", text).group(1)
        cp, kp = os.path.join(self.dir, "client.crt"), os.path.join(self.dir, "client.key")
        with open(cp, "wb") as f:
            f.write(base64.b64decode(crt))
        with open(kp, "wb") as f:
            f.write(base64.b64decode(key))
        self._ctx.load_cert_chain(cp, kp)

    def kubeconfig_for(self, name, path=None):
        """A kubeconfig whose current context uses user NAME (kubesim writes a context
        `kubesim-NAME` for every user after the first). Returns its path."""
        with open(self.kubeconfig) as f:
            text = f.read()
        if name != self.users[0]:
            text = text.replace("current-context: kubesim\n", "current-context: kubesim-%s\n" % name)
        path = path or os.path.join(self.dir, "kubeconfig-" + name.replace(":", "_"))
        with open(path, "w") as f:
            f.write(text)
        return path

    def request(self, method, path, body=None, token=None, content_type=None,
                headers=None, timeout=30):
        """Return (status, parsed JSON or raw text, headers)."""
        data = None
        hdrs = dict(headers or {})
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            hdrs.setdefault("Content-Type", content_type or "application/json")
        tok = token if token is not None else self.token
        if tok:
            hdrs["Authorization"] = "Bearer " + tok
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=timeout) as r:
                raw, status, rh = r.read(), r.status, r.headers
        except urllib.error.HTTPError as e:
            raw, status, rh = e.read(), e.code, e.headers
        try:
            return status, json.loads(raw), rh
        except ValueError:
            return status, raw.decode("utf-8", "replace"), rh

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body, kind="merge", **kw):
        ct = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
              "strategic": "application/strategic-merge-patch+json"}[kind]
        return self.request("PATCH", path, body, content_type=ct, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def ok(self, method, path, body=None, **kw):
        """Like request() but fails the case on any non-2xx answer."""
        status, obj, _ = self.request(method, path, body, **kw)
        if status // 100 != 2:
            raise CheckFailed("%s %s -> %d %s" % (method, path, status, obj))
        return obj

    def faults(self, rules):
        return self.ok("POST", "/_sim/faults", rules)

    def clear_faults(self):
        return self.ok("DELETE", "/_sim/faults")

    def requests(self):
        return self.ok("GET", "/_sim/requests")

    def kubectl(self, *args, check=True, timeout=60, input=None, kubeconfig=None):
        """Run the real kubectl against this kubesim; returns CompletedProcess."""
        argv = ["kubectl", "--kubeconfig", kubeconfig or self.kubeconfig, "--cache-dir", self.cache_dir] + list(args)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise CheckFailed("kubectl %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                            r.stderr.strip()[-1500:]))
        return r

    def apply(self, obj_or_path):
        """kubectl apply -f of an object, a list of objects, a `List`, or a path.

        Lists go to kubectl as a stream of JSON documents: kubectl validates a
        `kind: List` client-side through /openapi/v2, which kubesim does not
        serve.
        """
        if isinstance(obj_or_path, str):
            return self.kubectl("apply", "-f", obj_or_path)
        items = obj_or_path
        if isinstance(items, dict):
            items = items.get("items", []) if items.get("kind") == "List" else [items]
        return self.kubectl("apply", "-f", "-", input="\n".join(json.dumps(o) for o in items))

    def bulk(self, template, count, name="obj-{i:06d}", namespace=None, start=0):
        """Create count objects from template fast (kubesim's /_sim/bulk)."""
        body = {"template": template, "count": count, "name": name, "start": start}
        if namespace:
            body["namespace"] = namespace
        return self.ok("POST", "/_sim/bulk", body)

    def compact(self):
        """Make every resourceVersion and continue token issued so far too old."""
        return self.ok("POST", "/_sim/compact")

    def reset(self):
        return self.ok("POST", "/_sim/reset")

    def install_crds(self, namespace="cairn-system"):
        """cairn's CRDs from schema/crds/ and the namespace cairn works in."""
        self.kubectl("apply", "-f", os.path.join(SRCDIR, "schema/crds/"))
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


class Case:
    """What a case function receives: temp dirs, processes, checks."""

    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir, exist_ok=True)
        self.procs = []
        self.cleanups = []

    def mkdir(self, name):
        d = os.path.join(self.dir, name)
        os.makedirs(d, exist_ok=True)
        return d

    def path(self, name):
        return os.path.join(self.dir, name)

    def spawn(self, argv, name=None, env=None, cwd=None):
        name = name or os.path.basename(str(argv[0]))
        p = Proc(argv, os.path.join(self.dir, "%s.%d.log" % (name, len(self.procs))), env=env, cwd=cwd)
        self.procs.append(p)
        return p

    def kubesim(self, **kw):
        return Kubesim(self, **kw)

    def on_cleanup(self, fn):
        self.cleanups.append(fn)

    def check(self, cond, why):
        if not cond:
            raise CheckFailed(why)

    def eq(self, got, want, what="value"):
        if got != want:
            raise CheckFailed("%s: got %r, want %r" % (what, got, want))

    def skip(self, why):
        raise Skip(why)

    def finish(self):
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception:  # noqa: BLE001 - cleanup must go on
                traceback.print_exc()
        for p in self.procs:
            p.stop(timeout=5)


def cairn(*args, env=None, timeout=120, check=False, input=None, cwd=None):
    """Run the cairn binary; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    if env:
        full_env.update({k: str(v) for k, v in env.items()})
    return subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, check=check, input=input, cwd=cwd)


_cases = []


def case(fn=None, *, xfail=None):
    """Register a test case: fn(t) with t a Case.

    `@case(xfail="#17: PodMetrics are backed up, restore fails")` marks a case
    that fails because of a known cairn bug, named with the issue that will
    fix it. Such a case prints `XFAIL: <file>:<case>: <reason>` when it fails
    (tests/run.sh does not count it as a failure) and `XPASS: <file>:<case>:
    <reason>` when it passes (a failure: the bug is fixed, take the marker
    off). The reason must name the issue (`#N`)."""
    if fn is None:
        if not xfail or "#" not in xfail:
            raise ValueError("case(xfail=...) needs a reason naming the issue (#N)")

        def reg(f):
            f.xfail = xfail
            _cases.append(f)
            return f
        return reg
    fn.xfail = None
    _cases.append(fn)
    return fn


def main():
    """Run the registered cases (or those named in argv); exit 1 on a failure
    or an unexpected pass of an xfail case."""
    prog = os.path.basename(sys.argv[0])
    only = set(sys.argv[1:])
    failed = 0
    for fn in _cases:
        if only and fn.__name__ not in only:
            continue
        t = Case(fn.__name__)
        label = "%s:%s" % (prog, fn.__name__)
        xfail = getattr(fn, "xfail", None)
        start = time.monotonic()
        try:
            fn(t)
            if xfail:
                status = "XPASS: %s: %s" % (label, xfail)
                failed += 1
            else:
                status = "PASS: %s" % label
        except Skip as e:
            status = "SKIP: %s: %s" % (label, e)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            traceback.print_exc(file=sys.stdout)
            why = str(e).replace("\n", " ")[:500] or type(e).__name__
            if xfail:
                print("expected failure of %s: %s" % (label, why))
                status = "XFAIL: %s: %s" % (label, xfail)
            else:
                status = "FAIL: %s: %s" % (label, why)
                failed += 1
        finally:
            t.finish()
        print("%s  (%.1fs)" % (status, time.monotonic() - start) if status.startswith("PASS")
              else status, flush=True)
    sys.exit(1 if failed else 0)

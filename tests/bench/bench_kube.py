#!/usr/bin/env python3
"""Benchmark (not a test): the kube client's streamed, paged list.

usage: bench_kube.py [--count N] [--small N] [--runs N] [--limit N]

Lists N (default 100k) and SMALL (default 10k) ConfigMaps from a TLS kubesim
with a token through tests/helpers/kube_tool (limit=500, every item parsed by
cJSON and handed to a callback), once with kubesim's gzip on (the client
accepts gzip like client-go) and once with it off. For each list it prints
the client's CPU time per object (user+sys of the kube_tool process, from
wait4), wall time, and the client's peak RSS (its VmHWM); then the RSS of a 1-object list
as the baseline. Expected: CPU per object roughly constant, peak RSS flat
between 10k and 100k objects (one item is buffered at a time).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cairntest import BUILDDIR, Case  # noqa: E402

TOOL = os.path.join(BUILDDIR, "tests/helpers/kube_tool")


def run_list(kubeconfig, ns, limit):
    """Run one list; returns (items, cpu seconds, wall seconds, max RSS KiB)."""
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    t0 = time.monotonic()
    p = subprocess.Popen([TOOL, "--kubeconfig", kubeconfig, "--stats", "list", "core", "v1",
                          "configmaps", ns, "limit=%d" % limit], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit("kube_tool list failed: %s" % out[-500:])
    items = int(out.split("items=")[1].split()[0])
    # The tool reports its own VmHWM: wait4's ru_maxrss would include the
    # forked Python's memory from before the exec.
    rss = int(err.split("peak_rss_kb=")[1].split()[0])
    return items, ru.ru_utime + ru.ru_stime, wall, rss


def bench(t, gz, opts):
    extra = [] if gz else ["--no-gzip"]
    sim = t.kubesim(name="kubesim-gzip" if gz else "kubesim-plain", extra=extra)
    tmpl = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"labels": {"app": "bench", "tier": "backend"},
                         "annotations": {"note": "x" * 64}},
            "data": {"config.yaml": "key: value\n" * 8, "other": "y" * 32}}
    sim.bulk(tmpl, opts.count, name="cm-{i:06d}", namespace="default")
    sim.bulk(tmpl, opts.small, name="cm-{i:06d}", namespace="kube-public")
    sim.bulk(tmpl, 1, name="cm-{i:06d}", namespace="kube-node-lease")
    label = "gzip" if gz else "plain"
    res = {}
    for ns, n in (("kube-node-lease", 1), ("kube-public", opts.small), ("default", opts.count)):
        best = None
        for _ in range(opts.runs):
            r = run_list(sim.kubeconfig, ns, opts.limit)
            if r[0] != n:
                raise SystemExit("listed %d of %d" % (r[0], n))
            best = r if best is None or r[1] < best[1] else best
        res[n] = best
        items, cpu, wall, rss = best
        if n > 1:
            print("%-5s list %7d objects: client CPU %6.2f us/object (%.2f s), wall %.2f s "
                  "(%.0f objects/s), peak RSS %d KiB" % (label, items, cpu * 1e6 / items, cpu,
                                                        wall, items / wall, rss))
        else:
            print("%-5s list %7d object : peak RSS %d KiB (baseline)" % (label, items, rss))
    r_small, r_big = res[opts.small][3], res[opts.count][3]
    print("%-5s peak RSS %dk -> %dk objects: %d -> %d KiB (x%.2f); over baseline: %+d / %+d KiB"
          % (label, opts.small // 1000, opts.count // 1000, r_small, r_big, r_big / r_small,
             r_small - res[1][3], r_big - res[1][3]))
    sys.stdout.flush()
    sim.proc.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--small", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=500)
    opts = ap.parse_args()
    if not os.path.exists(TOOL):
        raise SystemExit("build tests/helpers/kube_tool first (make check builds it)")
    t = Case("bench_kube_%d" % os.getpid())
    try:
        for gz in (True, False):
            bench(t, gz, opts)
    finally:
        t.finish()


if __name__ == "__main__":
    main()

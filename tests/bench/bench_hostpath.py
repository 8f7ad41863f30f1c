"""bench_hostpath: the hostpath volume mover against `tar czf` of the same
directory, in the same run (issue 11).

A directory of CAIRN_BENCH_VOLUME_MB (default 200) MB: half incompressible
blobs, half text-like files, and a few thousand small files; no sparse
file (its holes would count as throughput that reads nothing: issue 27).
Prints for each: seconds, MB/s of file data, stored size; and the mover's
restore against `tar xzf`. Figures only.

To compare two builds in the same run, set $CAIRN_BENCH_BASE_BIN to the
other build's cairn binary: its tests/helpers/volume_mover (next to it, as
`make check` builds it) then runs too, interleaved with this build's, each
backup and restore $CAIRN_BENCH_REPS times (default 3); medians and the
ratio this/base are printed (the machine may be shared: same-run ratios;
the backups' CPU seconds too, which a loaded machine disturbs less).
This build runs twice per round: the plain tar.gz copy ("this", the same
work as the base) and the deduplicated first copy into a fresh store
("dedup", --chunks: what `cairn server` does for every hostPath volume
since issue 25, so the figure a user gets); the base build only knows the
plain copy.
"""
import os
import resource
import statistics
import subprocess
import sys
import time

SRC = os.environ["CAIRN_SRCDIR"]
BUILD = os.environ["CAIRN_BUILDDIR"]
TMP = os.environ.get("CAIRN_TMP", "/tmp")
MB = float(os.environ.get("CAIRN_BENCH_VOLUME_MB", "200"))
MOVER = os.path.join(BUILD, "tests", "helpers", "volume_mover")
BASE_BIN = os.environ.get("CAIRN_BENCH_BASE_BIN")
REPS = max(1, int(os.environ.get("CAIRN_BENCH_REPS", "3")))


def make_tree(root):
    os.makedirs(root, exist_ok=True)
    half = int(MB * (1 << 20) / 2)
    i = 0
    left = half
    while left > 0:
        n = min(left, 4 << 20)
        with open(os.path.join(root, "blob-%03d" % i), "wb") as f:
            f.write(os.urandom(n))
        left -= n
        i += 1
    left = half
    i = 0
    line = b"2026-12-02T12:00:00Z INFO request served path=/api/v1/items status=200 bytes=%d\n"
    while left > 0:
        n = min(left, 2 << 20)
        d = os.path.join(root, "logs", "d%02d" % (i % 10))
        os.makedirs(d, exist_ok=True)
        data = b"".join(line % k for k in range(n // 70 + 1))[:n]
        with open(os.path.join(d, "app-%04d.log" % i), "wb") as f:
            f.write(data)
        left -= n
        i += 1
    small = os.path.join(root, "small")
    os.makedirs(small, exist_ok=True)
    for k in range(3000):
        with open(os.path.join(small, "f%05d" % k), "wb") as f:
            f.write(b"x" * (k % 700))


def logical(root):
    """Bytes of file data; the tree must have no holes (every block read)."""
    total = 0
    for d, _, files in os.walk(root):
        for n in files:
            st = os.lstat(os.path.join(d, n))
            if st.st_blocks * 512 < st.st_size:
                sys.exit("bench_hostpath: %s is sparse" % os.path.join(d, n))
            total += st.st_size
    return total


def child_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(argv, cpu=None):
    """Run argv: (wall seconds, its stdout); its CPU seconds appended to cpu."""
    c0, t0 = child_cpu(), time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("%s failed: %s" % (argv[0], r.stderr))
    if cpu is not None:
        cpu.append(child_cpu() - c0)
    return dt, r.stdout


def main():
    if not os.path.exists(MOVER):
        print("volume_mover not built (make check builds it)")
        return
    src = os.path.join(TMP, "src")
    make_tree(src)
    subprocess.run(["sync"])
    nbytes = logical(src)
    store = os.path.join(TMP, "store")
    out = os.path.join(TMP, "tar.tar.gz")
    # Warm the page cache once so both runs read from memory.
    subprocess.run(["tar", "cf", "/dev/null", "-C", src, "."])
    dt_m, txt = timed([MOVER, "backup", store, "v/vol.tar.gz", src])
    stored = os.path.getsize(os.path.join(store, "v", "vol.tar.gz"))
    dt_t, _ = timed(["tar", "czf", out, "-C", src, "."])
    tar_size = os.path.getsize(out)
    mb = nbytes / 1e6
    print("data: %.0f MB of file data, no sparse files" % mb)
    print("hostpath mover backup: %6.2f s %7.1f MB/s stored %6.1f MB  (%s)" %
          (dt_m, mb / dt_m, stored / 1e6, txt.strip()))
    print("tar czf              : %6.2f s %7.1f MB/s stored %6.1f MB" % (dt_t, mb / dt_t, tar_size / 1e6))
    print("ratio mover/tar (throughput): %.2f" % (dt_t / dt_m))
    dst = os.path.join(TMP, "dst")
    dt_r, _ = timed([MOVER, "restore", store, "v/vol.tar.gz", dst])
    xdst = os.path.join(TMP, "xdst")
    os.makedirs(xdst)
    dt_x, _ = timed(["tar", "xzf", out, "-C", xdst])
    print("hostpath mover restore: %6.2f s %7.1f MB/s" % (dt_r, mb / dt_r))
    print("tar xzf               : %6.2f s %7.1f MB/s" % (dt_x, mb / dt_x))
    print("ratio mover/tar (restore throughput): %.2f" % (dt_x / dt_r))
    if BASE_BIN:
        compare(src, mb)


def mover_argv(mover, op, store, src_or_dst, dedup):
    if not dedup:
        return [mover, op, store, "v/vol.tar.gz", src_or_dst]
    argv = [mover, op, store, "backups/b/volumes/pv.index.tar.gz", src_or_dst,
            "--chunks", "plugins/cairn-hostpath/pv/"]
    return argv + (["--backup", "b"] if op == "backup" else [])


def stored_bytes(store):
    n = 0
    for d, _, files in os.walk(store):
        n += sum(os.path.getsize(os.path.join(d, f)) for f in files)
    return n


def compare(src, mb):
    """This build's mover (plain and deduplicated) against the base build's,
    interleaved (the order rotates each round), medians."""
    base = os.path.join(os.path.dirname(os.path.abspath(BASE_BIN)), "tests", "helpers",
                        "volume_mover")
    if not os.path.exists(base):
        print("base volume_mover not built: %s" % base)
        return
    runs = [("base", base, False), ("this", MOVER, False), ("dedup", MOVER, True)]
    times = {tag: {"backup": [], "restore": [], "stored": 0, "cpu": []} for tag, _, _ in runs}
    for rep in range(REPS):
        k = rep % len(runs)
        for tag, mover, dedup in runs[k:] + runs[:k]:
            store = os.path.join(TMP, "cmp-%s-%d" % (tag, rep))
            dst = os.path.join(TMP, "cmp-dst-%s-%d" % (tag, rep))
            dt, _ = timed(mover_argv(mover, "backup", store, src, dedup), times[tag]["cpu"])
            times[tag]["backup"].append(dt)
            times[tag]["stored"] = stored_bytes(store)
            dt, _ = timed(mover_argv(mover, "restore", store, dst, dedup))
            times[tag]["restore"].append(dt)
            subprocess.run(["rm", "-rf", store, dst])
    for op in ("backup", "restore"):
        b = statistics.median(times["base"][op])
        line = "%-7s median of %d: base %6.2f s (%6.1f MB/s)" % (op, REPS, b, mb / b)
        for tag in ("this", "dedup"):
            t = statistics.median(times[tag][op])
            line += "  %s %6.2f s (%6.1f MB/s, ratio %s/base (time) %.2f)" % (
                tag, t, mb / t, tag, t / b)
        print(line)
    b = statistics.median(times["base"]["cpu"])
    print("backup CPU (user+sys) median of %d: base %.2f s  this %.2f s (ratio %.2f)  dedup %.2f s "
          "(ratio %.2f): steadier than wall time on a loaded machine" % (
              REPS, b, statistics.median(times["this"]["cpu"]), statistics.median(times["this"]["cpu"]) / b,
              statistics.median(times["dedup"]["cpu"]), statistics.median(times["dedup"]["cpu"]) / b))
    print("per round (s), base/this/dedup backup: %s" % "  ".join(
        "%.2f/%.2f/%.2f" % (times["base"]["backup"][i], times["this"]["backup"][i],
                            times["dedup"]["backup"][i]) for i in range(REPS)))
    print("stored: base %.1f MB, this %.1f MB, dedup %.1f MB (index + packs + refs)" % (
        times["base"]["stored"] / 1e6, times["this"]["stored"] / 1e6,
        times["dedup"]["stored"] / 1e6))

main()

"""The journal survives kill -9: every checkpoint reported as committed is
there after the crash, and the file is whole.

tests/helpers/journal_crasher records checkpoints (backup parts) as fast
as it can and prints "committed N" only after journal_part_add() or
journal_commit() returned 0. We SIGKILL it at a random moment (half the
runs from exec on, half once commits flow), 200 times
on the same journal file; after every kill `journal_crasher verify` opens
the journal (WAL recovery), runs PRAGMA integrity_check, and checks that
the parts are exactly 1..max with the right content; every part the
writer had reported must be within that range. Python's own sqlite3 then
reads the file independently at the end.
"""
import os
import random
import re
import signal
import sqlite3
import subprocess
import time

from cairntest import BUILDDIR, case, main

CRASHER = os.path.join(BUILDDIR, "tests", "helpers", "journal_crasher")
KILLS = 200


def reported(path):
    """The part numbers the writer printed (complete lines only)."""
    with open(path, "rb") as f:
        data = f.read().decode("ascii", "replace")
    lines = data.split("\n")[:-1]          # a cut last line does not count
    got = []
    for line in lines:
        m = re.fullmatch(r"committed (\d+)", line)
        if m:
            got.append(int(m.group(1)))
        elif line.startswith("error:"):
            raise AssertionError("writer failed: %s" % line)
    return got


@case
def kill9_200_times_loses_no_reported_checkpoint(t):
    t.check(os.access(CRASHER, os.X_OK), "missing %s (make check builds it)" % CRASHER)
    db = t.path("journal.db")
    rng = random.Random(int(os.environ.get("CAIRN_SEED", "0")) or None)
    best = 0            # highest part any writer reported
    fruitful = 0        # runs killed after at least one new commit
    for run in range(KILLS):
        out = t.path("writer.out")
        with open(out, "wb") as f:
            p = subprocess.Popen([CRASHER, "write", db], stdout=f,
                                 stderr=subprocess.STDOUT)
            if run % 2 == 0:
                # Any moment from exec on: open, WAL recovery, claim...
                time.sleep(rng.uniform(0.002, 0.040))
            else:
                # ...or in the middle of the stream of commits, however
                # long start-up takes (sanitizer builds are slow).
                end = time.monotonic() + 10
                while os.path.getsize(out) == 0 and p.poll() is None \
                        and time.monotonic() < end:
                    time.sleep(0.001)
                time.sleep(rng.uniform(0.0, 0.030))
            p.send_signal(signal.SIGKILL)
            p.wait()
        t.eq(p.returncode, -signal.SIGKILL, "run %d: writer exit status" % run)
        got = reported(out)
        if got:
            t.eq(got, list(range(got[0], got[-1] + 1)), "run %d: reported parts in order" % run)
            t.eq(got[0], best + 1, "run %d: first part of the resumed writer" % run)
            best = max(best, got[-1])
            fruitful += 1
        v = subprocess.run([CRASHER, "verify", db], capture_output=True, text=True, timeout=60)
        t.check(v.returncode == 0, "run %d: verify failed: %s %s" % (run, v.stdout, v.stderr))
        m = re.search(r"ok parts=(\d+)", v.stdout)
        t.check(m is not None, "run %d: verify said %r" % (run, v.stdout))
        have = int(m.group(1))
        t.check(have >= best, "run %d: journal has parts 1..%d but part %d was reported "
                "committed" % (run, have, best))
        best = max(best, have)
    # The kills must have landed while checkpoints were being written.
    t.check(fruitful >= KILLS // 3, "only %d of %d runs committed anything" % (fruitful, KILLS))
    # An independent reader agrees.
    con = sqlite3.connect(db)
    try:
        t.eq(con.execute("PRAGMA integrity_check").fetchone()[0], "ok", "integrity_check")
        n, mx = con.execute("SELECT count(*), max(part_number) FROM parts").fetchone()
        t.eq(n, mx, "parts are 1..max")
        t.check(n >= best, "python sees %d parts, %d were reported" % (n, best))
    finally:
        con.close()
    print("# %d kills, %d runs committed checkpoints, %d parts in the journal" % (
        KILLS, fruitful, best), flush=True)


main()

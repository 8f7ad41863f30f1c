"""The chaos suite, short (issue 19): a few trials of tests/chaos/chaos.py
in the normal suite (`make chaos` runs the long campaign). The seed is
printed; FAIL names the trial and what it found."""
import os
import random
import sys

from cairntest import case, main, SRCDIR

sys.path.insert(0, os.path.join(SRCDIR, "tests", "chaos"))
import chaos  # noqa: E402


@case
def chaos_short(t):
    seed = int(os.environ.get("CAIRN_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
    plan = [("kill", 3), ("kill-restore", 1), ("stop", 1), ("api-500", 1), ("s3-reset", 1)]
    counts, failures = chaos.campaign(seed, plan, 2000)
    t.check(not failures, "seed %d: %s" % (seed, "; ".join(
        "trial %d %s: %s" % (i, k, m[:400]) for i, k, m in failures)))
    t.eq(counts["lost_or_dup"], 0, "lost or duplicated")


main()

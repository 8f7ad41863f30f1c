#!/bin/sh
# bench_journal.sh: journal write rates (checkpoints and restore progress,
# unbatched and batched) and lookups, from tests/helpers/journal_bench.
# Figures only, never pass/fail. JOURNAL_BENCH_SECONDS sets the time spent
# on each figure (default 1).
set -u
bin="$CAIRN_BUILDDIR/tests/helpers/journal_bench"
[ -x "$bin" ] || { echo "missing $bin (make bench builds it)"; exit 1; }
dir="${CAIRN_TMP:-/tmp}/bench_journal.$$"
mkdir -p "$dir" || exit 1
df -h "$dir" | tail -1 | awk '{print "# file system: " $1 " (" $NF ")"}'
"$bin" "$dir" "${JOURNAL_BENCH_SECONDS:-1}"
rc=$?
rm -rf "$dir"
exit $rc

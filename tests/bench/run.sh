#!/bin/sh
# tests/bench/run.sh: run every benchmark (make bench). Benchmarks print
# figures and ratios against a baseline measured in the same run; they never
# pass or fail on timing. Arguments filter by file name substring.
set -u
export PYTHONPATH="$CAIRN_SRCDIR/tests/lib${PYTHONPATH:+:$PYTHONPATH}"
root=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench.XXXXXX") || exit 1
trap 'rm -rf "$root"' EXIT
for b in "$CAIRN_SRCDIR"/tests/bench/bench_*; do
	[ -f "$b" ] || continue
	name=$(basename "$b")
	if [ $# -gt 0 ]; then
		hit=0
		for pat in "$@"; do case "$name" in *"$pat"*) hit=1 ;; esac; done
		[ "$hit" = 1 ] || continue
	fi
	echo "==== $name"
	mkdir -p "$root/$name"
	case "$b" in
	*.py) (cd "$root/$name" && CAIRN_TMP="$root/$name" python3 "$b") ;;
	*.sh) (cd "$root/$name" && CAIRN_TMP="$root/$name" sh "$b") ;;
	esac || echo "(benchmark $name exited $?)"
done

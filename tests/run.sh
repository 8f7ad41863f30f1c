#!/bin/sh
# tests/run.sh: cairn's test runner (called by `make check`).
#
# Runs every C unit-test program (build tree tests/unit/test_*) and every
# integration test (source tree tests/integration/test_*.py|sh), each in a
# private temp directory ($CAIRN_TMP) inside its own process group, which is
# killed when the test ends. A test prints one line per case:
#   PASS: name | FAIL: name: why | SKIP: name: why
#   XFAIL: name: reason   a case marked as failing because of a known bug
#                         (the reason names the issue) failed: not a failure
#   XPASS: name: reason   such a case passed: a failure (take the marker off)
# A program that exits non-zero without a FAIL or XPASS line counts as one
# failure; one that exits 0 without any line counts as one pass. Any
# sanitizer report (ASan/UBSan/TSan write them to $CAIRN_TMP/sanitizer.*) fails
# the test.
# The last line starts "N passed, N failed" (then ", N skipped" and
# ", N expected failures" when there are any) and the exit code is 1 on any
# failure, XPASS included; XFAIL cases alone leave it 0.
#
# Arguments: optional substrings; only tests whose file name contains one run.
# Environment: CAIRN_TEST_TIMEOUT (seconds per test program, default 900),
# CAIRN_KEEP_TMP=1 keeps every temp directory.
set -u

: "${CAIRN_SRCDIR:?CAIRN_SRCDIR must be set (run through make check)}"
: "${CAIRN_BUILDDIR:?CAIRN_BUILDDIR must be set}"
: "${CAIRN_BIN:=$CAIRN_BUILDDIR/cairn}"
export CAIRN_SRCDIR CAIRN_BUILDDIR CAIRN_BIN
timeout_s=${CAIRN_TEST_TIMEOUT:-900}

root=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tests.XXXXXX") || exit 1
export PYTHONPATH="$CAIRN_SRCDIR/tests/lib${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

passed=0 failed=0 skipped=0 xfailed=0 ran=0
failures=""
xfails=""

FILTERS="$*"
wanted() {
	[ -z "$FILTERS" ] && return 0
	for pat in $FILTERS; do
		case "$1" in *"$pat"*) return 0 ;; esac
	done
	return 1
}

list_tests() {
	for f in "$CAIRN_BUILDDIR"/tests/unit/test_*; do
		[ -f "$f" ] && [ -x "$f" ] && case "$f" in *.o|*.c) ;; *) echo "$f" ;; esac
	done
	for f in "$CAIRN_SRCDIR"/tests/integration/test_*.py \
	    "$CAIRN_SRCDIR"/tests/integration/test_*.sh; do
		[ -f "$f" ] && echo "$f"
	done
}

run_one() {
	path=$1
	name=$(basename "$path")
	tmp="$root/$name"
	mkdir -p "$tmp"
	case "$path" in
	*.py) set -- python3 "$path" ;;
	*.sh) set -- sh "$path" ;;
	*) set -- "$path" ;;
	esac
	start=$(date +%s)
	(
		cd "$tmp" || exit 1
		CAIRN_TMP="$tmp" \
		ASAN_OPTIONS="log_path=$tmp/sanitizer.asan:detect_leaks=1:abort_on_error=0:strict_string_checks=1" \
		UBSAN_OPTIONS="log_path=$tmp/sanitizer.ubsan:print_stacktrace=1:halt_on_error=1" \
		TSAN_OPTIONS="log_path=$tmp/sanitizer.tsan:second_deadlock_stack=1:suppressions=$CAIRN_SRCDIR/tests/tsan.supp" \
		exec setsid timeout -k 10 "$timeout_s" "$@"
	) >"$tmp/output.log" 2>&1 </dev/null &
	pid=$!
	wait $pid
	rc=$?
	kill -9 -- "-$pid" 2>/dev/null
	secs=$(( $(date +%s) - start ))

	p=$(grep -c '^PASS: ' "$tmp/output.log")
	f=$(grep -c -E '^(FAIL|XPASS): ' "$tmp/output.log")
	s=$(grep -c '^SKIP: ' "$tmp/output.log")
	x=$(grep -c '^XFAIL: ' "$tmp/output.log")
	grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS): ' "$tmp/output.log"
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		if [ "$rc" -eq 124 ]; then why="timed out after ${timeout_s}s"; else why="exited $rc"; fi
		echo "FAIL: $name: $why"
		f=1
	fi
	if [ "$rc" -eq 0 ] && [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ] && [ "$x" -eq 0 ]; then
		echo "PASS: $name"
		p=1
	fi
	san=$(find "$tmp" -name 'sanitizer.*' -size +0 2>/dev/null | head -5)
	if [ -n "$san" ]; then
		echo "FAIL: $name: sanitizer report"
		for sf in $san; do sed -n '1,60p' "$sf"; done
		[ "$f" -eq 0 ] && f=1
	fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s)); xfailed=$((xfailed + x))
	[ "$x" -gt 0 ] && xfails="$xfails $name"
	ran=$((ran + 1))
	if [ "$f" -gt 0 ]; then
		failures="$failures $name"
		echo "---- $name: last lines of output ($tmp/output.log) ----"
		grep -vE '^(PASS|SKIP|XFAIL): ' "$tmp/output.log" | tail -n 40
		echo "----"
	elif [ "${CAIRN_KEEP_TMP:-0}" != 1 ]; then
		rm -rf "$tmp"
	fi
	echo "# $name: ${secs}s"
}

for t in $(list_tests); do
	wanted "$(basename "$t")" || continue
	run_one "$t"
done

[ -n "$xfails" ] && echo "expected failures (known bugs) in:$xfails"
[ -n "$failures" ] && echo "failed:$failures (output kept in $root)"
[ -z "$failures" ] && [ "${CAIRN_KEEP_TMP:-0}" != 1 ] && rm -rf "$root"
if [ "$ran" -eq 0 ]; then
	echo "no test matched"
	failed=1
fi
summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary="$summary, $skipped skipped"
[ "$xfailed" -gt 0 ] && summary="$summary, $xfailed expected failures"
echo "$summary"
[ "$failed" -eq 0 ]

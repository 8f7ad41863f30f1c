#!/bin/sh
# tests/fuzz/run.sh: run libFuzzer targets of a fuzzing build for a while each.
#
#   ./configure CC=clang --enable-fuzzing && make <the tests/fuzz/fuzz_* targets>
#   sh tests/fuzz/run.sh [-t SECONDS] [-j PARALLEL] [-w WORKDIR] [TARGET...]
#
# Each target starts from its committed seeds (tests/fuzz/corpus/<t>/) and
# writes what it finds to WORKDIR/<t>/ (corpus) and WORKDIR/art_<t>/
# (crashes, leaks, timeouts); its log is WORKDIR/<t>.log. Runs at nice 19.
# Prints one line per target: its executions, coverage and findings, and
# exits 1 if any target found something. Defaults: 600 s, 3 at a time,
# all targets, WORKDIR ./fuzz-work. Run from the (fuzzing) build directory.
set -u
secs=600 par=3 work=./fuzz-work
while getopts t:j:w: o; do
	case $o in
	t) secs=$OPTARG ;; j) par=$OPTARG ;; w) work=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
src=$(cd "$(dirname "$0")/../.." && pwd)
targets=${*:-"archive base s3xml watch list plugin kubeconfig awscreds discovery selector restore_path voltar chunks"}
mkdir -p "$work"
run_one() {
	t=$1
	mkdir -p "$work/$t" "$work/art_$t"
	nice -n 19 "./tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix="$work/art_$t/" "$work/$t" "$src/tests/fuzz/corpus/$t" \
	    > "$work/$t.log" 2>&1
}
running=0
for t in $targets; do
	run_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$par" ]; then
		wait
		running=0
	fi
done
wait
bad=0
for t in $targets; do
	execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$')
	cov=$(grep -o 'cov: [0-9]*' "$work/$t.log" | tail -1)
	found=$(ls "$work/art_$t" | wc -l)
	[ "$found" -gt 0 ] && bad=1
	echo "fuzz_$t: ${execs:-?} executions in ${secs}s, ${cov:-cov: ?}, $found findings"
done
exit $bad

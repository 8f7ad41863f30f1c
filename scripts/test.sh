#!/bin/bash
# scripts/test.sh: install what is missing, build, run the whole test suite.
# The last line starts "N passed, N failed" (expected failures, XFAIL, are
# not failures); the exit code is non-zero on any failure. Arguments are
# passed to the runner as name filters.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec make -s check TESTS_FILTER="$*"

# tests/: the runner, unit-test frame, integration tests and benchmarks.
# Modules add their own unit tests (tests/unit/test_<module>.c) in their
# local.mk; test helper programs go under tests/helpers/.
EXTRA_DIST += tests/run.sh tests/unit/unit.h tests/lib/cairntest.py

# base/: the shared helpers every module uses (errors, logging, memory,
# buffers, time, flags, JSON access, the metrics registry, base64 and YAML).
# Depends on libc, cJSON, libcrypto (base64) and libyaml.
noinst_LIBRARIES += base/libbase.a
CAIRN_MODULE_LIBS += base/libbase.a
base_libbase_a_SOURCES = \
	base/err.c base/err.h \
	base/log.c base/log.h \
	base/mem.c base/mem.h \
	base/buf.c base/buf.h \
	base/timeutil.c base/timeutil.h \
	base/flags.c base/flags.h base/flags.def \
	base/jsonutil.c base/jsonutil.h \
	base/util.c base/util.h \
	base/metrics.c base/metrics.h base/metrics.def \
	base/fault.c base/fault.h \
	base/signals.c base/signals.h \
	base/codec.c base/codec.h

check_PROGRAMS += tests/unit/test_metrics
tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.c tests/unit/unit.h
tests_unit_test_metrics_LDADD = base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_base
tests_unit_test_base_SOURCES = tests/unit/test_base.c tests/unit/unit.h
tests_unit_test_base_LDADD = base/libbase.a $(DEPS_LIBS)

if FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_base
tests_fuzz_fuzz_base_SOURCES = tests/fuzz/fuzz_base.c
tests_fuzz_fuzz_base_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_base_LDADD = base/libbase.a $(DEPS_LIBS)
endif

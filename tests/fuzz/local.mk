# tests/fuzz/: libFuzzer targets for every parser of outside input
# (./configure CC=clang --enable-fuzzing; docs/development.md) and, in every
# build, their corpus replays: tests/unit/test_fuzz_<target> runs the
# target's LLVMFuzzerTestOneInput over tests/fuzz/corpus/<target>/ without
# libFuzzer (tests/fuzz/replay.c), so `make check` replays every seed.
# fuzz_archive, fuzz_base and fuzz_s3xml are built by their modules' local.mk.
FUZZ_LDADD = engine/libengine.a storage/libstorage.a journal/libjournal.a \
	kube/libkube.a base/libbase.a $(DEPS_LIBS)
EXTRA_DIST += tests/fuzz/corpus

check_PROGRAMS += tests/unit/test_fuzz_archive
tests_unit_test_fuzz_archive_SOURCES = tests/fuzz/fuzz_archive.c tests/fuzz/replay.c
tests_unit_test_fuzz_archive_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"archive"'
tests_unit_test_fuzz_archive_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_base
tests_unit_test_fuzz_base_SOURCES = tests/fuzz/fuzz_base.c tests/fuzz/replay.c
tests_unit_test_fuzz_base_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"base"'
tests_unit_test_fuzz_base_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_s3xml
tests_unit_test_fuzz_s3xml_SOURCES = tests/fuzz/fuzz_s3xml.c tests/fuzz/replay.c
tests_unit_test_fuzz_s3xml_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"s3xml"'
tests_unit_test_fuzz_s3xml_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_watch
tests_unit_test_fuzz_watch_SOURCES = tests/fuzz/fuzz_watch.c tests/fuzz/replay.c
tests_unit_test_fuzz_watch_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"watch"'
tests_unit_test_fuzz_watch_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_list
tests_unit_test_fuzz_list_SOURCES = tests/fuzz/fuzz_list.c tests/fuzz/replay.c
tests_unit_test_fuzz_list_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"list"'
tests_unit_test_fuzz_list_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_plugin
tests_unit_test_fuzz_plugin_SOURCES = tests/fuzz/fuzz_plugin.c tests/fuzz/replay.c
tests_unit_test_fuzz_plugin_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"plugin"'
tests_unit_test_fuzz_plugin_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_kubeconfig
tests_unit_test_fuzz_kubeconfig_SOURCES = tests/fuzz/fuzz_kubeconfig.c tests/fuzz/replay.c
tests_unit_test_fuzz_kubeconfig_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"kubeconfig"'
tests_unit_test_fuzz_kubeconfig_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_awscreds
tests_unit_test_fuzz_awscreds_SOURCES = tests/fuzz/fuzz_awscreds.c tests/fuzz/replay.c
tests_unit_test_fuzz_awscreds_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"awscreds"'
tests_unit_test_fuzz_awscreds_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_discovery
tests_unit_test_fuzz_discovery_SOURCES = tests/fuzz/fuzz_discovery.c tests/fuzz/replay.c
tests_unit_test_fuzz_discovery_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"discovery"'
tests_unit_test_fuzz_discovery_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_selector
tests_unit_test_fuzz_selector_SOURCES = tests/fuzz/fuzz_selector.c tests/fuzz/replay.c
tests_unit_test_fuzz_selector_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"selector"'
tests_unit_test_fuzz_selector_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_restore_path
tests_unit_test_fuzz_restore_path_SOURCES = tests/fuzz/fuzz_restore_path.c tests/fuzz/replay.c
tests_unit_test_fuzz_restore_path_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"restore_path"'
tests_unit_test_fuzz_restore_path_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_chunks
tests_unit_test_fuzz_chunks_SOURCES = tests/fuzz/fuzz_chunks.c tests/fuzz/fuzz_volume.c \
	tests/fuzz/fuzz_volume.h tests/fuzz/replay.c
tests_unit_test_fuzz_chunks_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"chunks"'
tests_unit_test_fuzz_chunks_LDADD = $(FUZZ_LDADD)

check_PROGRAMS += tests/unit/test_fuzz_voltar
tests_unit_test_fuzz_voltar_SOURCES = tests/fuzz/fuzz_voltar.c tests/fuzz/fuzz_volume.c \
	tests/fuzz/fuzz_volume.h tests/fuzz/replay.c
tests_unit_test_fuzz_voltar_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_TARGET='"voltar"'
tests_unit_test_fuzz_voltar_LDADD = $(FUZZ_LDADD)

if FUZZING

noinst_PROGRAMS += tests/fuzz/fuzz_watch
tests_fuzz_fuzz_watch_SOURCES = tests/fuzz/fuzz_watch.c
tests_fuzz_fuzz_watch_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_watch_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_list
tests_fuzz_fuzz_list_SOURCES = tests/fuzz/fuzz_list.c
tests_fuzz_fuzz_list_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_list_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_plugin
tests_fuzz_fuzz_plugin_SOURCES = tests/fuzz/fuzz_plugin.c
tests_fuzz_fuzz_plugin_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_plugin_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_kubeconfig
tests_fuzz_fuzz_kubeconfig_SOURCES = tests/fuzz/fuzz_kubeconfig.c
tests_fuzz_fuzz_kubeconfig_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_kubeconfig_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_awscreds
tests_fuzz_fuzz_awscreds_SOURCES = tests/fuzz/fuzz_awscreds.c
tests_fuzz_fuzz_awscreds_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_awscreds_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_discovery
tests_fuzz_fuzz_discovery_SOURCES = tests/fuzz/fuzz_discovery.c
tests_fuzz_fuzz_discovery_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_discovery_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_selector
tests_fuzz_fuzz_selector_SOURCES = tests/fuzz/fuzz_selector.c
tests_fuzz_fuzz_selector_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_selector_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_restore_path
tests_fuzz_fuzz_restore_path_SOURCES = tests/fuzz/fuzz_restore_path.c
tests_fuzz_fuzz_restore_path_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_restore_path_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_chunks
tests_fuzz_fuzz_chunks_SOURCES = tests/fuzz/fuzz_chunks.c tests/fuzz/fuzz_volume.c \
	tests/fuzz/fuzz_volume.h
tests_fuzz_fuzz_chunks_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_chunks_LDADD = $(FUZZ_LDADD)

noinst_PROGRAMS += tests/fuzz/fuzz_voltar
tests_fuzz_fuzz_voltar_SOURCES = tests/fuzz/fuzz_voltar.c tests/fuzz/fuzz_volume.c \
	tests/fuzz/fuzz_volume.h
tests_fuzz_fuzz_voltar_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_voltar_LDADD = $(FUZZ_LDADD)

endif

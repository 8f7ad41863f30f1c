# engine/: the controllers (backup now; restore, schedule, gc later) and the
# tarball part writer. See engine/README.md.
noinst_LIBRARIES += engine/libengine.a
CAIRN_MODULE_LIBS += engine/libengine.a
engine_libengine_a_SOURCES = \
	engine/lease.c engine/lease.h \
	engine/tarparts.c engine/tarparts.h \
	engine/gzmember.c engine/gzmember.h \
	engine/partsink.c engine/partsink.h \
	engine/bspec.c engine/bspec.h \
	engine/spec_fields.c engine/spec_fields.h \
	engine/bsl.c engine/bsl.h \
	engine/backup.c engine/backup.h \
	engine/itemlog.c engine/itemlog.h \
	engine/claim.c engine/claim.h \
	engine/server.c engine/server.h

check_PROGRAMS += tests/unit/test_engine_tarparts
tests_unit_test_engine_tarparts_SOURCES = tests/unit/test_engine_tarparts.c
tests_unit_test_engine_tarparts_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_engine_gzmember
tests_unit_test_engine_gzmember_SOURCES = tests/unit/test_engine_gzmember.c
tests_unit_test_engine_gzmember_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_engine_bspec
tests_unit_test_engine_bspec_SOURCES = tests/unit/test_engine_bspec.c
tests_unit_test_engine_bspec_LDADD = engine/libengine.a kube/libkube.a base/libbase.a $(DEPS_LIBS)

# Restores (issue 9): safe tarball reader, item plan, apply, controller.
engine_libengine_a_SOURCES += \
	engine/archive_read.c engine/archive_read.h \
	engine/archive_read_store.c \
	engine/partsrc.c engine/partsrc.h \
	engine/restore_plan.c engine/restore_plan.h \
	engine/restore.c engine/restore.h \
	engine/restore_actions.c engine/restore_actions.h \
	engine/restore_item.c engine/restore_int.h

check_PROGRAMS += tests/unit/test_restore_archive tests/unit/test_restore_plan \
	tests/unit/test_restore_actions
tests_unit_test_restore_actions_SOURCES = tests/unit/test_restore_actions.c
tests_unit_test_restore_actions_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)
tests_unit_test_restore_plan_SOURCES = tests/unit/test_restore_plan.c
tests_unit_test_restore_plan_LDADD = engine/libengine.a kube/libkube.a base/libbase.a $(DEPS_LIBS)
tests_unit_test_restore_archive_SOURCES = tests/unit/test_restore_archive.c
tests_unit_test_restore_archive_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

if FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz_archive
tests_fuzz_fuzz_archive_SOURCES = tests/fuzz/fuzz_archive.c
tests_fuzz_fuzz_archive_LDFLAGS = -fsanitize=fuzzer
tests_fuzz_fuzz_archive_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)
endif

# The restore controller loop for tests until engine/server.c runs restores.
check_PROGRAMS += tests/helpers/restore_runner
tests_helpers_restore_runner_SOURCES = tests/helpers/restore_runner.c
tests_helpers_restore_runner_LDADD = engine/libengine.a storage/libstorage.a \
	journal/libjournal.a kube/libkube.a base/libbase.a $(DEPS_LIBS)

# Operations (issue 12): cron, schedules, garbage collection, sync, BSL health.
engine_libengine_a_SOURCES += \
	engine/cron.c engine/cron.h \
	engine/schedule.c engine/schedule.h \
	engine/gc.c engine/gc.h \
	engine/sync.c engine/sync.h \
	engine/upkeep.c engine/upkeep.h

check_PROGRAMS += tests/unit/test_cron
tests_unit_test_cron_SOURCES = tests/unit/test_cron.c
tests_unit_test_cron_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

# Volumes (issue 11): plugin runner, hostpath mover, volume orchestration.
engine_libengine_a_SOURCES += \
	engine/plugin.c engine/plugin.h \
	engine/hostpath.c engine/hostpath.h \
	engine/chunker.c engine/chunker.h \
	engine/chunks.c engine/chunks.h engine/chunks_int.h \
	engine/chunks_write.c engine/chunks_read.c engine/chunks_gc.c \
	engine/volumes.h engine/volumes_int.h engine/volumes_op.c \
	engine/volumes_backup.c engine/volumes_restore.c engine/volumes_agent.c \
	engine/volumes_plugin.c

check_PROGRAMS += tests/unit/test_plugin
tests_unit_test_plugin_SOURCES = tests/unit/test_plugin.c
tests_unit_test_plugin_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_hostpath
tests_unit_test_hostpath_SOURCES = tests/unit/test_hostpath.c
tests_unit_test_hostpath_LDADD = engine/libengine.a storage/libstorage.a \
	base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_chunks
tests_unit_test_chunks_SOURCES = tests/unit/test_chunks.c
tests_unit_test_chunks_LDADD = engine/libengine.a storage/libstorage.a \
	base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/helpers/volume_mover
tests_helpers_volume_mover_SOURCES = tests/helpers/volume_mover.c
tests_helpers_volume_mover_LDADD = engine/libengine.a storage/libstorage.a \
	base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/helpers/volume_tool
tests_helpers_volume_tool_SOURCES = tests/helpers/volume_tool.c
tests_helpers_volume_tool_LDADD = engine/libengine.a storage/libstorage.a \
	journal/libjournal.a kube/libkube.a base/libbase.a $(DEPS_LIBS)

# What the server publishes (issue 10): the status document and its
# builders, readiness probes, outcome metrics from the journal. cmd/ wires
# it to web/; the engine does not include web/.
engine_libengine_a_SOURCES += engine/status.c engine/status.h \
	engine/status_doc.c engine/status_doc.h \
	engine/status_cache.c engine/status_cache.h

check_PROGRAMS += tests/unit/test_status_doc
tests_unit_test_status_doc_SOURCES = tests/unit/test_status_doc.c tests/unit/unit.h
tests_unit_test_status_doc_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_status_cache
tests_unit_test_status_cache_SOURCES = tests/unit/test_status_cache.c tests/unit/unit.h
tests_unit_test_status_cache_LDADD = engine/libengine.a kube/libkube.a base/libbase.a $(DEPS_LIBS)

# Leases and claims (issue 8): the Lease against an in-process fake API.
check_PROGRAMS += tests/unit/test_lease
tests_unit_test_lease_SOURCES = tests/unit/test_lease.c tests/unit/unit_kube.h
tests_unit_test_lease_LDADD = engine/libengine.a kube/libkube.a \
	base/libbase.a $(DEPS_LIBS)

# Backup and restore hooks (issue 21): exec in pods, crash-safe freezes.
engine_libengine_a_SOURCES += \
	engine/hooks.c engine/hooks.h \
	engine/hooks_backup.c engine/hooks_backup.h

check_PROGRAMS += tests/unit/test_engine_hooks
tests_unit_test_engine_hooks_SOURCES = tests/unit/test_engine_hooks.c
tests_unit_test_engine_hooks_LDADD = engine/libengine.a kube/libkube.a base/libbase.a $(DEPS_LIBS)
engine_libengine_a_SOURCES += engine/hooks_restore.c engine/hooks_restore.h

# Backup verification (issue 22): read back and check a backup in storage.
engine_libengine_a_SOURCES += engine/verify.c engine/verify.h

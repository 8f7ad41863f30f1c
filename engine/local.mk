# engine/: the controllers (backup now; restore, schedule, gc later) and the
# tarball part writer. See engine/README.md.
noinst_LIBRARIES += engine/libengine.a
CAIRN_MODULE_LIBS += engine/libengine.a
engine_libengine_a_SOURCES = \
	engine/tarparts.c engine/tarparts.h \
	engine/bspec.c engine/bspec.h \
	engine/bsl.c engine/bsl.h \
	engine/backup.c engine/backup.h \
	engine/server.c engine/server.h

check_PROGRAMS += tests/unit/test_engine_tarparts
tests_unit_test_engine_tarparts_SOURCES = tests/unit/test_engine_tarparts.c
tests_unit_test_engine_tarparts_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

check_PROGRAMS += tests/unit/test_engine_bspec
tests_unit_test_engine_bspec_SOURCES = tests/unit/test_engine_bspec.c
tests_unit_test_engine_bspec_LDADD = engine/libengine.a kube/libkube.a base/libbase.a $(DEPS_LIBS)

# Volumes (issue 11): plugin runner, hostpath mover, volume orchestration.
engine_libengine_a_SOURCES += \
	engine/plugin.c engine/plugin.h

check_PROGRAMS += tests/unit/test_plugin
tests_unit_test_plugin_SOURCES = tests/unit/test_plugin.c
tests_unit_test_plugin_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

# engine/: the controllers (backup now; restore, schedule, gc later) and the
# tarball part writer. See engine/README.md.
noinst_LIBRARIES += engine/libengine.a
CAIRN_MODULE_LIBS += engine/libengine.a
engine_libengine_a_SOURCES = \
	engine/tarparts.c engine/tarparts.h

check_PROGRAMS += tests/unit/test_engine_tarparts
tests_unit_test_engine_tarparts_SOURCES = tests/unit/test_engine_tarparts.c
tests_unit_test_engine_tarparts_LDADD = engine/libengine.a base/libbase.a $(DEPS_LIBS)

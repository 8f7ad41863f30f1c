# journal/: fragment owned by the journal module (see journal/README.md).
# The SQL schema lives in schema/journal.sql; journal/schema_sql.h is
# generated from it in the build tree (never hand-copied into C).
noinst_LIBRARIES += journal/libjournal.a
CAIRN_MODULE_LIBS += journal/libjournal.a
journal_libjournal_a_SOURCES = journal/journal.c journal/journal.h
nodist_journal_libjournal_a_SOURCES = journal/schema_sql.h
EXTRA_DIST += schema/journal.sql journal/README.md docs/journal.md \
	tests/integration/test_journal_crash.py tests/bench/bench_journal.sh
CLEANFILES += journal/schema_sql.h

# schema/journal.sql as one C string, line by line.
journal/schema_sql.h: $(srcdir)/schema/journal.sql $(srcdir)/journal/local.mk
	$(AM_V_GEN)$(MKDIR_P) journal && { \
	  echo '/* generated from schema/journal.sql by journal/local.mk: do not edit */'; \
	  echo 'static const char journal_schema_sql[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/	/\\t/g' \
	      -e 's/^/"/' -e 's/$$/\\n"/' $(srcdir)/schema/journal.sql; \
	  echo ';'; } >$@-t && mv -f $@-t $@
journal/journal.$(OBJEXT): journal/schema_sql.h

JOURNAL_TEST_LIBS = journal/libjournal.a base/libbase.a $(DEPS_LIBS)
check_PROGRAMS += tests/unit/test_journal
tests_unit_test_journal_SOURCES = tests/unit/test_journal.c tests/unit/unit.h
tests_unit_test_journal_LDADD = $(JOURNAL_TEST_LIBS)

# Helpers: the crash-test child (tests/integration/test_journal_crash.py)
# and the benchmark (tests/bench/bench_journal.sh).
check_PROGRAMS += tests/helpers/journal_crasher tests/helpers/journal_bench
tests_helpers_journal_crasher_SOURCES = tests/helpers/journal_crasher.c
tests_helpers_journal_crasher_LDADD = $(JOURNAL_TEST_LIBS)
tests_helpers_journal_bench_SOURCES = tests/helpers/journal_bench.c
tests_helpers_journal_bench_LDADD = $(JOURNAL_TEST_LIBS)

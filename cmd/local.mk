# cmd/: the CLI and `cairn server` (argument parsing, output, progress).
# Command implementations register themselves in cmd/commands.c.
CMD_SOURCES = \
	cmd/main.c cmd/cli.h \
	cmd/commands.c \
	cmd/cmd_version.c \
	cmd/cmd_server.c \
	cmd/output.c cmd/output.h \
	cmd/progress.c cmd/progress.h \
	cmd/cmd_backup.c

check_PROGRAMS += tests/unit/test_cmd_output
tests_unit_test_cmd_output_SOURCES = tests/unit/test_cmd_output.c \
	cmd/output.c cmd/output.h cmd/progress.c cmd/progress.h
tests_unit_test_cmd_output_LDADD = base/libbase.a $(DEPS_LIBS)

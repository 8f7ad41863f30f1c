# cmd/: the CLI and `cairn server` (argument parsing, output, progress).
# Command implementations register themselves in cmd/commands.c.
CMD_SOURCES = \
	cmd/main.c cmd/cli.h \
	cmd/commands.c \
	cmd/cmd_version.c \
	cmd/cmd_server.c \
	cmd/cmd_node_agent.c \
	cmd/describe_volumes.c \
	cmd/describe_store.c \
	cmd/output.c cmd/output.h \
	cmd/progress.c cmd/progress.h \
	cmd/cmd_backup.c \
	cmd/cmd_restore.c \
	cmd/specflags.c

# backup-location create|get (issue 5, storage)
CMD_SOURCES += cmd/cmd_location.c
# decrypt and backup verify (issue 22, storage)
CMD_SOURCES += cmd/cmd_decrypt.c cmd/cmd_verify.c

check_PROGRAMS += tests/unit/test_cmd_output
tests_unit_test_cmd_output_SOURCES = tests/unit/test_cmd_output.c \
	cmd/output.c cmd/output.h cmd/progress.c cmd/progress.h
tests_unit_test_cmd_output_LDADD = base/libbase.a $(DEPS_LIBS)

# cairn install / uninstall (issue 12): the CRDs of schema/crds/ are embedded
# into the binary as a generated C source.
CMD_SOURCES += cmd/cmd_install.c cmd/cmd_schedule.c
nodist_cairn_SOURCES = cmd/install_crds.c
INSTALL_CRD_FILES = \
	schema/crds/cairn.io_backups.yaml \
	schema/crds/cairn.io_backupstoragelocations.yaml \
	schema/crds/cairn.io_restores.yaml \
	schema/crds/cairn.io_schedules.yaml \
	schema/crds/cairn.io_volumepluginbackups.yaml \
	schema/crds/cairn.io_volumepluginrestores.yaml
cmd/install_crds.c: $(srcdir)/schema/install/embed.sh \
		$(addprefix $(srcdir)/,$(INSTALL_CRD_FILES))
	$(AM_V_GEN)mkdir -p cmd && $(SHELL) $(srcdir)/schema/install/embed.sh \
	    $@ $(addprefix $(srcdir)/,$(INSTALL_CRD_FILES))
CLEANFILES += cmd/install_crds.c
EXTRA_DIST += schema/install/embed.sh schema/install/rbac.def \
	$(INSTALL_CRD_FILES)

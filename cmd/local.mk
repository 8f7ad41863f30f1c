# cmd/: the CLI and `cairn server` (argument parsing, output, progress).
# Command implementations register themselves in cmd/commands.c.
CMD_SOURCES = \
	cmd/main.c cmd/cli.h \
	cmd/commands.c \
	cmd/cmd_version.c

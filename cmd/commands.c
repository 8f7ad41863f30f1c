/*
 * commands.c: the table of every cairn command. Help text, usage and the
 * accepted flags all come from here and from base/flags.def.
 */
#include "config.h"
#include "cmd/cli.h"

#include <stddef.h>

const enum flag_id cli_global_flags[] = {
	F_HELP, F_LOG_LEVEL, F_LOG_FORMAT, F__END
};

const enum flag_id cli_cluster_flags[] = {
	F_KUBECONFIG, F_CONTEXT, F_NAMESPACE, F_QPS, F_BURST,
	F_REQUEST_TIMEOUT, F__END
};

static const enum flag_id no_flags[] = { F__END };

const struct cli_command cli_commands[] = {
	{ "version", "Print cairn's version and the versions of its libraries",
	  "", NULL, no_flags, cmd_version },
};

const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

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
static const enum flag_id server_flags[] = { F_KUBECONFIG, F_CONTEXT,
	F_NAMESPACE, F_QPS, F_BURST, F_REQUEST_TIMEOUT, F_SERVER_ID, F_JOURNAL,
	F_WORKERS, F_LISTEN, F_WEB_TOKEN_FILE, F_LEASE_DURATION,
	F_RENEW_DEADLINE, F_RETRY_PERIOD, F_SHUTDOWN_GRACE, F_SHARD_SELECTOR,
	F_PART_SIZE, F__END };

const struct cli_command cli_commands[] = {
	{ "version", "Print cairn's version and the versions of its libraries",
	  "", NULL, no_flags, cmd_version },
	{ "server", "Run the controller: claim and run backups, resume after a crash",
	  "[FLAGS]",
	  "Watches the Backups in --namespace, claims New ones with a\n"
	  "conditional status write, streams their items into a Velero-format\n"
	  "tarball in parts and checkpoints each part in --journal and in the\n"
	  "Backup's status. Restarted with the same --server-id and journal it\n"
	  "resumes its InProgress backups. SIGTERM/SIGINT stop it cleanly.",
	  server_flags, cmd_server },
};

const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

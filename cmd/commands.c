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
	F_PLUGIN_DIR, F_PLUGIN_TIMEOUT, F_VOLUME_ROOT, F_VOLUME_CLAIM_TIMEOUT,
	F_PART_SIZE, F_GC_PERIOD, F_RESTORE_WORKERS,
	F_TERMINATING_RESOURCE_TIMEOUT, F_DEFAULT_LOCATION, F_VERIFY_PERIOD,
	F_LIST_CONCURRENCY, F_COMPRESSION_THREADS, F__END };

static const enum flag_id node_agent_flags[] = { F_KUBECONFIG, F_CONTEXT,
	F_NAMESPACE, F_QPS, F_BURST, F_REQUEST_TIMEOUT, F_SERVER_ID, F_JOURNAL,
	F_LEASE_DURATION, F_RENEW_DEADLINE, F_RETRY_PERIOD, F_NODE_NAME,
	F_PLUGIN_DIR, F_PLUGIN_TIMEOUT, F_VOLUME_ROOT, F_VOLUME_CLAIM_TIMEOUT,
	F_PART_SIZE, F_LISTEN, F_WEB_TOKEN_FILE, F__END };

#define CLUSTER_FLAGS F_KUBECONFIG, F_CONTEXT, F_NAMESPACE, F_QPS, F_BURST, \
	F_REQUEST_TIMEOUT
static const enum flag_id backup_create_flags[] = { CLUSTER_FLAGS,
	F_INCLUDE_NAMESPACES, F_EXCLUDE_NAMESPACES, F_INCLUDE_RESOURCES,
	F_EXCLUDE_RESOURCES, F_INCLUDE_CLUSTER_RESOURCES, F_SELECTOR, F_TTL,
	F_STORAGE_LOCATION, F_SNAPSHOT_VOLUMES, F_LABELS, F_WAIT, F__END };
static const enum flag_id backup_get_flags[] = { CLUSTER_FLAGS, F_OUTPUT,
	F__END };
static const enum flag_id backup_name_flags[] = { CLUSTER_FLAGS, F__END };
static const enum flag_id backup_describe_flags[] = { CLUSTER_FLAGS,
	F_DETAILS, F_OUTPUT, F__END };
static const enum flag_id backup_download_flags[] = { CLUSTER_FLAGS,
	F_OUTPUT_FILE, F_OUTPUT, F_FORCE, F__END };
static const enum flag_id backup_delete_flags[] = { CLUSTER_FLAGS, F_CONFIRM,
	F__END };
static const enum flag_id backup_rm_flags[] = { CLUSTER_FLAGS, F_CONFIRM,
	F_PLUGIN_DIR, F_PLUGIN_TIMEOUT, F__END };
static const enum flag_id install_flags[] = { CLUSTER_FLAGS, F_REPLICAS,
	F_IMAGE, F_IMAGE_PULL_POLICY, F_PROVIDER, F_BUCKET, F_PREFIX, F_CONFIG,
	F_CREDENTIAL_FILE, F_NODE, F_WEB_TOKEN_FILE, F_USE_NODE_AGENT,
	F_VOLUME_DIRS, F_DRY_RUN, F_OUTPUT, F_WAIT, F_SELECTOR,
	F_ENCRYPTION_KEY_FILE, F_ENCRYPT, F_ENCRYPTION_KEY_ID, F__END };
static const enum flag_id restore_create_flags[] = { CLUSTER_FLAGS,
	F_FROM_BACKUP, F_FROM_SCHEDULE, F_NAMESPACE_MAPPINGS, F_INCLUDE_NAMESPACES,
	F_EXCLUDE_NAMESPACES, F_INCLUDE_RESOURCES, F_EXCLUDE_RESOURCES,
	F_SELECTOR, F_EXISTING_RESOURCE_POLICY, F_RESTORE_STATUS,
	F_INCLUDE_CLUSTER_RESOURCES, F_LABELS, F_WAIT, F__END };
static const enum flag_id restore_get_flags[] = { CLUSTER_FLAGS, F_OUTPUT,
	F__END };
static const enum flag_id restore_name_flags[] = { CLUSTER_FLAGS, F__END };
static const enum flag_id uninstall_flags[] = { CLUSTER_FLAGS, F_PURGE,
	F__END };
static const enum flag_id schedule_create_flags[] = { CLUSTER_FLAGS,
	F_SCHEDULE, F_INCLUDE_NAMESPACES, F_EXCLUDE_NAMESPACES,
	F_INCLUDE_RESOURCES, F_EXCLUDE_RESOURCES, F_INCLUDE_CLUSTER_RESOURCES,
	F_SELECTOR, F_TTL, F_STORAGE_LOCATION, F_SNAPSHOT_VOLUMES, F_PAUSED,
	F_SKIP_IMMEDIATELY, F_USE_OWNER_REFERENCES, F_LABELS, F__END };
static const enum flag_id schedule_unpause_flags[] = { CLUSTER_FLAGS,
	F_SKIP_IMMEDIATELY, F__END };

static const enum flag_id location_create_flags[] = { CLUSTER_FLAGS,
	F_PROVIDER, F_BUCKET, F_PREFIX, F_CONFIG, F_CREDENTIAL_FILE, F_DEFAULT,
	F_ACCESS_MODE, F__END };
static const enum flag_id location_get_flags[] = { CLUSTER_FLAGS, F_OUTPUT,
	F__END };
static const enum flag_id decrypt_flags[] = { F_KEY_FILE, F__END };
static const enum flag_id backup_verify_flags[] = { CLUSTER_FLAGS,
	F_LOCATION_FROM_FILE, F_CREDENTIAL_FILE, F_KEY_FILE, F__END };

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
	{ "node-agent", "Run volume work for one node (a DaemonSet next to the server)",
	  "--node-name NODE [FLAGS]",
	  "Claims the VolumePluginBackups and VolumePluginRestores labelled\n"
	  "cairn.io/node=NODE and runs them: the built-in hostpath mover (paths\n"
	  "under --volume-root) or a plugin from --plugin-dir. Progress goes to\n"
	  "each object's status at most once a second; a restart with the same\n"
	  "--server-id and --journal resumes a copy after its last stored part.",
	  node_agent_flags, cmd_node_agent },
	{ "install", "Install cairn on a cluster (CRDs, RBAC, storage location, servers)",
	  "[--provider fs|s3 --bucket B --prefix P --config K=V,...] [--image REF] [--dry-run -o yaml|json]",
	  "Creates or updates, in order: the namespace, the CRDs, a\n"
	  "ServiceAccount with least-privilege RBAC (docs/operations.md says\n"
	  "what each rule is for), the credentials Secret (--credential-file),\n"
	  "the web token Secret cairn-web-token (generated, or\n"
	  "--web-token-file; a re-run keeps it), the default\n"
	  "BackupStorageLocation (no --provider: a directory on the node,\n"
	  "--config path=DIR, default /var/lib/cairn/backups), a StatefulSet\n"
	  "of `cairn server --listen` pods (probed on /healthz and /readyz;\n"
	  "every other path needs the token) and their headless Service, and\n"
	  "with --use-node-agent a DaemonSet of `cairn node-agent` (volume data\n"
	  "on each node, from the host directories --volume-dirs).\n"
	  "Servers: 2 with s3; 1 with fs, pinned to the node holding the\n"
	  "directory (--node, or the cluster's only node). They run as uid\n"
	  "65532, read-only, without capabilities: with s3 they pass Pod\n"
	  "Security \"restricted\"; fs (a hostPath) and the node-agent need\n"
	  "\"privileged\". Before writing a workload, install asks the API\n"
	  "server (a dry-run pod) whether the namespace admits its pods, and\n"
	  "stops with what to change when it does not.\n"
	  "Running it again changes nothing (each object reports unchanged).\n"
	  "--dry-run prints the objects instead, for one kubectl apply -f - on\n"
	  "a fresh cluster (-o yaml|json). It leaves the storage location out,\n"
	  "since kubectl maps every kind before creating any: the servers\n"
	  "create it when they start (cairn server --default-location, set\n"
	  "from the same flags).\n"
	  "-l limits the objects to those whose labels match.\n"
	  "--wait waits for the CRDs to be Established.",
	  install_flags, cmd_install },
	{ "uninstall", "Remove what cairn install made; backups in storage are kept",
	  "[--purge]",
	  "Stops the servers first (and waits for their pods), then removes\n"
	  "the node-agent, Service, storage location object, Secrets, RBAC and\n"
	  "ServiceAccount, and says what it keeps: the backups in storage\n"
	  "(never touched), the CRDs, the namespace and its Backups, Restores\n"
	  "and Schedules and the servers' journal volumes (a reinstall picks\n"
	  "them up) unless --purge, and the node-agent journals on the nodes.",
	  uninstall_flags, cmd_uninstall },
	{ "decrypt", "Decrypt an object stored by an encrypting location, offline",
	  "--key-file [ID=]FILE IN OUT",
	  "Reads IN (an object as stored: a tarball, a metadata file, a volume\n"
	  "archive; \"-\" for stdin) and writes its plaintext to OUT (\"-\" for\n"
	  "stdout). Every chunk is authenticated before it is written: a\n"
	  "changed, missing or extra byte fails with the part and byte range,\n"
	  "and OUT is only created when all of IN decrypted. Give each key\n"
	  "the backup may use (--key-file once per key; ID= names its key\n"
	  "id). No cluster is needed; docs/backup-format.md has the format.",
	  decrypt_flags, cmd_decrypt },
	{ "schedule create", "Create a schedule of backups",
	  "NAME --schedule CRON [backup filter flags] [--ttl D] [--paused] [--labels K=V,...]",
	  "CRON is 5 fields (minute hour day month weekday) or @every 6h,\n"
	  "@hourly, @daily, @weekly, @monthly, @yearly, @midnight; all in UTC.\n"
	  "Each due time makes one Backup named NAME-YYYYMMDDhhmmss (UTC),\n"
	  "however many servers run. A new schedule backs up at once unless\n"
	  "--skip-immediately. --labels go on the Schedule and on each of its\n"
	  "Backups (with cairn.io/schedule-name=NAME), so a --shard-selector\n"
	  "sees them from the start.",
	  schedule_create_flags, cmd_schedule_create },
	{ "schedule get", "List schedules, or show one",
	  "[NAME] [-o table|json|yaml]", NULL, backup_get_flags,
	  cmd_schedule_get },
	{ "schedule describe", "Show a schedule, its next due time and backups",
	  "NAME", NULL, backup_name_flags, cmd_schedule_describe },
	{ "schedule pause", "Stop a schedule from creating backups",
	  "NAME", NULL, backup_name_flags, cmd_schedule_pause },
	{ "schedule unpause", "Resume a paused schedule",
	  "NAME [--skip-immediately]",
	  "Missed due times give one backup at once, unless --skip-immediately\n"
	  "(then the next backup is at the next due time).",
	  schedule_unpause_flags, cmd_schedule_unpause },
	{ "schedule delete", "Delete a schedule (its backups are kept)",
	  "NAME [--confirm]", NULL, backup_delete_flags, cmd_schedule_delete },
	{ "backup create", "Create a backup of cluster objects",
	  "NAME [FLAGS]",
	  "Writes a Backup object; a cairn server claims it and streams the\n"
	  "selected objects into a Velero-format tarball in object storage.\n"
	  "With --wait, follows it to the end: a progress bar on a terminal,\n"
	  "plain progress lines otherwise; exit 0 when Completed, 1 otherwise.\n"
	  "The label selector and the TTL are checked here (exit 2).\n"
	  "--labels are set on the Backup as it is created (a server's\n"
	  "--shard-selector sees them before anyone claims it).",
	  backup_create_flags, cmd_backup_create },
	{ "backup get", "List backups, or show one",
	  "[NAME] [-o table|json|yaml]",
	  "STATUS is the phase, or Waiting for a New backup no server has\n"
	  "claimed yet. ITEMS is items backed up / items expected.",
	  backup_get_flags, cmd_backup_get },
	{ "backup verify", "Read a backup back from storage and check that it is whole",
	  "NAME [--location-from-file BSL --credential-file F --key-file [ID=]K]",
	  "Reads every stored object of the backup and checks: the metadata\n"
	  "files read whole; the tarball's parts have the SHA-256 the backup\n"
	  "recorded and together the recorded size; the archive reads to its\n"
	  "end; its items are the ones the resource list names; each volume\n"
	  "archive reads whole with its recorded size. In an encrypting\n"
	  "location every byte is authenticated on the way. The first problem\n"
	  "names the part (and byte range) or the file. Exit 0 when every\n"
	  "check passed, 1 otherwise.\n"
	  "Without a cluster: --location-from-file names the location as JSON\n"
	  "or YAML, with its credentials (--credential-file) and keys\n"
	  "(--key-file); the Backup is then the stored velero-backup.json.",
	  backup_verify_flags, cmd_backup_verify },
	{ "backup describe", "Show a backup in detail",
	  "NAME [--details] [-o table|json|yaml]",
	  "Spec (filters), phase, progress, claim (holder, worker, attempt),\n"
	  "checkpoint (parts with ETags and last items), errors, hooks (how many\n"
	  "ran and failed, pods a pre hook froze), encryption and verification,\n"
	  "volumes, times and the files the backup has in storage (Velero's\n"
	  "layout). --details adds the items per resource kind (the resource\n"
	  "list in storage). -o json|yaml prints it all as one document:\n"
	  "{backup, storageKeys, volumes, resourceList}.",
	  backup_describe_flags, cmd_backup_describe },
	{ "backup logs", "Print the log of a finished backup",
	  "NAME",
	  "Reads backups/NAME/NAME-logs.gz from the backup's storage location:\n"
	  "Velero's line format, one line per event (time, level, msg, the\n"
	  "backup, the resource and namespace it is about): what was listed and\n"
	  "backed up, what was skipped and why, retries, every warning and\n"
	  "error.",
	  backup_name_flags, cmd_backup_logs },
	{ "backup download", "Download the tarball of a backup",
	  "NAME [--output-file FILE] [--force]",
	  "Streams backups/NAME/NAME.tar.gz to FILE (default NAME.tar.gz),\n"
	  "showing progress; -o FILE works too, as in Velero, and FILE - writes\n"
	  "to stdout. An existing FILE is kept unless --force.",
	  backup_download_flags, cmd_backup_download },
	{ "backup delete", "Delete a backup and its files in storage",
	  "NAME [--confirm] [--plugin-dir DIR]",
	  "Has the plugins in --plugin-dir delete the backup's volume snapshots\n"
	  "(a snapshot that cannot be deleted keeps everything else), deletes\n"
	  "its VolumePluginBackups, removes every object under backups/NAME/ in\n"
	  "the storage location, then the Backup object (and its cleanup\n"
	  "finalizer). Asks first unless --confirm is given.",
	  backup_rm_flags, cmd_backup_delete },
	{ "restore create", "Restore the objects of a backup into the cluster",
	  "[NAME] --from-backup BACKUP | --from-schedule SCHEDULE [FLAGS]",
	  "--from-schedule restores the schedule's latest Completed backup\n"
	  "(spec.scheduleName records the schedule, spec.backupName the backup).\n"
	  "Creates a Restore (NAME defaults to BACKUP-YYYYMMDDhhmmss, or\n"
	  "SCHEDULE-YYYYMMDDhhmmss); a cairn\n"
	  "server claims and runs it: Velero's priority order, parallel creates\n"
	  "within a tier, namespace mapping, filters, existing-resource policy,\n"
	  "restored status for the resources named by --restore-status. With\n"
	  "--wait, follows it with a progress bar; the exit code is 0 only when\n"
	  "it Completed.",
	  restore_create_flags, cmd_restore_create },
	{ "restore get", "List restores, or show one",
	  "[NAME] [-o table|json|yaml]", NULL,
	  restore_get_flags, cmd_restore_get },
	{ "restore describe", "Show a restore in detail, with its warnings and errors",
	  "NAME [--details] [-o table|json|yaml]",
	  "Status, progress and claim from the Restore object; warnings and\n"
	  "errors from restores/NAME/restore-NAME-results.gz in storage.\n"
	  "--details adds every item by resource kind and what became of it\n"
	  "(created, updated, skipped, failed). -o json|yaml prints one\n"
	  "document: {restore, results, resourceList}.",
	  backup_describe_flags, cmd_restore_describe },
	{ "restore logs", "Print the log of a finished restore",
	  "NAME", "Reads restores/NAME/restore-NAME-logs.gz from storage: Velero's\n"
	  "line format, as `backup logs`.",
	  restore_name_flags, cmd_restore_logs },
	{ "backup-location create", "Create a storage location (a directory or an S3 bucket)",
	  "NAME --provider fs|s3 [--bucket B] [--prefix P] [--config K=V,...] [--credential-file F] [--default] [--access-mode ReadWrite|ReadOnly]",
	  "Creates a BackupStorageLocation. fs: --config path=DIR (a directory\n"
	  "on the server's node). s3: --bucket, and --config endpoint=URL,\n"
	  "region=R, forcePathStyle=true, insecureSkipTLSVerify=true,\n"
	  "caCertFile=F, profile=P as needed. --credential-file (an AWS-format\n"
	  "credentials file) goes into the Secret cairn-location-NAME, which\n"
	  "the location names. The settings are checked as the server will open\n"
	  "them before anything is written; the storage itself is not contacted.\n"
	  "--default makes it the default (and clears that on the others);\n"
	  "without any location marked default, the one named \"default\" is\n"
	  "used, as in Velero. --access-mode ReadOnly: nothing is written or\n"
	  "deleted there (backups to it fail validation; restores and sync\n"
	  "read it).",
	  location_create_flags, cmd_location_create },
	{ "backup-location get", "List storage locations, or show one",
	  "[NAME] [-o table|json|yaml]", NULL, location_get_flags,
	  cmd_location_get },
};

const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

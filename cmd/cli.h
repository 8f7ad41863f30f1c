/*
 * cli.h: the command frame. Every command is a row in the table of
 * cmd/commands.c: its words ("backup create"), a one-line summary, a usage
 * line, a longer description, the flags it accepts (ids from
 * base/flags.def) and its run function.
 *
 * Exit codes: 0 success, 1 the operation failed, 2 usage error (unknown
 * command or flag, bad flag value, missing argument).
 */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

#include <stdio.h>

#include "base/flags.h"
#include "cmd/output.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

struct cli_command {
	const char *words;		/* "backup create" */
	const char *summary;		/* one line */
	const char *usage;		/* after "cairn <words> " */
	const char *description;	/* paragraphs, may be NULL */
	const enum flag_id *flags;	/* F__END-terminated */
	int (*run)(const struct cli_command *cmd, struct flagset *fs);
};

extern const struct cli_command cli_commands[];
extern const size_t cli_ncommands;

/* Flag groups shared by commands. */
extern const enum flag_id cli_global_flags[];
extern const enum flag_id cli_cluster_flags[];

/* Print "cairn: <msg>" and a usage hint for cmd to stderr; returns 2. */
int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
	CAIRN_PRINTF(2, 3);
/* Print "cairn: <msg>" to stderr; returns 1. */
int cli_fail(const char *fmt, ...) CAIRN_PRINTF(1, 2);
/* Apply --log-level / --log-format; returns 0 or 2 after printing. */
int cli_setup_logging(const struct cli_command *cmd, const struct flagset *fs);
/*
 * The API client from the cluster flags: 0, or -1 after printing why. Its
 * writes ask for strict field validation (kube_set_strict_fields), as
 * kubectl's do: a field the cluster's schema lacks (an older CRD) is
 * refused, never dropped.
 */
struct kube;
int cli_open_kube(const struct flagset *fs, struct kube **k);
/* obj[key] = the strings of list (NULL-terminated); nothing when empty. */
struct cJSON;
void cli_add_list(struct cJSON *obj, const char *key, char **list);
/* 1 when s is a DNS-1123 subdomain (what the API server checks names for). */
int cli_valid_name(const char *s);

/* Shared by the commands (cmd/specflags.c). */
/* spec's included/excluded namespaces and resources from their flags. */
void cli_add_scope(struct cJSON *spec, const struct flagset *fs);
/*
 * A Backup spec (or a Schedule's spec.template) from the flags: the scope,
 * includeClusterResources, labelSelector, ttl, storageLocation and
 * snapshotVolumes. 0, or 2 after printing the usage error.
 */
int cli_backup_spec(const struct cli_command *cmd, const struct flagset *fs,
	struct cJSON *spec);
/*
 * The --labels flag as a metadata.labels object (*out owned; NULL when
 * none given): 0, or 2 after printing the usage error for a bad one.
 */
int cli_labels(const struct cli_command *cmd, const struct flagset *fs,
	struct cJSON **out);
/*
 * *obj = the object `name` of gvr in ns: 0, or 1 after printing
 * `<kind> "<name>" not found in namespace <ns>` or the API error.
 */
struct kube_gvr;
int cli_get_named(struct kube *k, const struct kube_gvr *gvr, const char *ns,
	const char *kind, const char *name, struct cJSON **obj);
/*
 * A BackupStorageLocation spec from the storage flags (`location create`,
 * `install`): provider, objectStorage (bucket "local" when none: fs
 * ignores it, the CRD requires one), config from the KEY=VALUE items,
 * credential {secret, key} when secret is set, default and accessMode
 * ReadWrite. Owned; NULL with err on a malformed config item.
 */
struct cJSON *cli_location_spec(const char *provider, const char *bucket,
	const char *prefix, char *const *config, const char *secret,
	const char *key, int is_default, struct cairn_err *err);
/* The objects of a list: a kube_list() callback takes each into items. */
struct cli_collect {
	struct cJSON **items;	/* owned */
	size_t n, alloc;
	size_t cap;		/* > 0: item cap+1 stops with CAIRN_ETOOBIG */
};
int cli_collect_item(void *arg, struct cJSON *item);
void cli_collect_free(struct cli_collect *c);

/*
 * The keys of --key-file ([ID=]FILE, repeated): 1 and *out (owned; the
 * first key with an id is current), 0 when none was given, < 0 with err
 * on an unreadable or malformed key file.
 */
struct crypt_keyring;
int cli_keyring(const struct flagset *fs, struct crypt_keyring **out,
	struct cairn_err *err);

/* Commands. */
int cmd_version(const struct cli_command *cmd, struct flagset *fs);
int cmd_decrypt(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_verify(const struct cli_command *cmd, struct flagset *fs);
int cmd_location_create(const struct cli_command *cmd, struct flagset *fs);
int cmd_location_get(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_create(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_get(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_describe(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_logs(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_download(const struct cli_command *cmd, struct flagset *fs);
int cmd_backup_delete(const struct cli_command *cmd, struct flagset *fs);
int cmd_server(const struct cli_command *cmd, struct flagset *fs);
int cmd_node_agent(const struct cli_command *cmd, struct flagset *fs);

struct kube;
/*
 * Print the "Volumes:" section of a describe: the VolumePluginBackups of
 * backup `name` (restore 0) or VolumePluginRestores of restore `name`
 * (restore 1) in ns, with bar, bytes, rate, node and mover.
 */
void cli_describe_volumes(FILE *f, struct kube *k, const char *ns,
	int restore, const char *name);
/* The same operations as a JSON array of the objects (owned; NULL: failed). */
struct cJSON *cli_volume_objects(struct kube *k, const char *ns, int restore,
	const char *name);

/* What a describe reads from storage (cmd/describe_store.c). */
struct store;
/* The objects under dir ("backups/NAME/"): [{key, size}] (owned). */
int cli_stored_files(struct store *s, const char *dir, struct cJSON **out,
	struct cairn_err *err);
/* Print them, a table of KEY and SIZE indented by two. */
void cli_print_files(FILE *f, const struct cJSON *files);
/* A gzipped resource list file (Velero's), parsed (*out owned). */
int cli_resource_list(struct store *s, const char *key, struct cJSON **out,
	struct cairn_err *err);
/* "Resource List:" and each kind's items, as Velero's --details. */
void cli_print_resource_list(FILE *f, const struct cJSON *rl);
/*
 * describe -o json|yaml on stdout: {kind: obj, key2: v2, volumes,
 * resourceList}, the optional parts when not NULL (vols is taken, the
 * others borrowed). The exit code.
 */
int cli_print_describe(enum out_format fmt, const char *kind,
	const struct cJSON *obj, const char *key2, const struct cJSON *v2,
	struct cJSON *vols, const struct cJSON *rl);
int cmd_install(const struct cli_command *cmd, struct flagset *fs);
int cmd_uninstall(const struct cli_command *cmd, struct flagset *fs);
int cmd_schedule_create(const struct cli_command *cmd, struct flagset *fs);
int cmd_schedule_get(const struct cli_command *cmd, struct flagset *fs);
int cmd_schedule_describe(const struct cli_command *cmd, struct flagset *fs);
int cmd_schedule_pause(const struct cli_command *cmd, struct flagset *fs);
int cmd_schedule_unpause(const struct cli_command *cmd, struct flagset *fs);
int cmd_schedule_delete(const struct cli_command *cmd, struct flagset *fs);
int cmd_restore_create(const struct cli_command *cmd, struct flagset *fs);
int cmd_restore_get(const struct cli_command *cmd, struct flagset *fs);
int cmd_restore_describe(const struct cli_command *cmd, struct flagset *fs);
int cmd_restore_logs(const struct cli_command *cmd, struct flagset *fs);

#endif

/*
 * plugin.h: running volume snapshotter plugins (docs/plugins.md).
 *
 * A plugin is an executable file in the plugin directory. cairn starts it
 * once per operation (fork/exec, no shell, its own process group, a
 * scrubbed environment without any cluster or cloud credentials) and
 * talks JSON lines over its stdin/stdout:
 *
 *   plugin -> {"type":"hello","name":"x","protocolVersion":2,
 *              "volumeTypes":["hostPath","local"]}
 *   cairn  -> one request: {"type":"create_snapshot"|"restore_volume"|
 *              "delete_snapshot", ...}; protocol 1: then stdin is closed
 *   plugin -> {"type":"progress","bytesDone":N,"totalBytes":M} (any number)
 *   plugin -> {"type":"properties","properties":{"k":"v"}} (optional)
 *   plugin -> {"type":"kube","id":I,"method":"GET","path":"/apis/...",
 *              "body":{...}} (protocol 2, any number), each answered on
 *              stdin: {"type":"kube-response","id":I,"status":200,"body":...}
 *   plugin -> {"type":"result",...} or {"type":"error","message":"..."}
 *
 * Versions: cairn speaks 1 and 2 ($CAIRN_PLUGIN_PROTOCOL says the highest)
 * and talks to each plugin in the version of its hello. A version 1
 * plugin gets a request with version 1's fields only, and stdin closed
 * after it, exactly as before version 2 existed. Version 2 adds the
 * volume's objects to requests (PersistentVolume, claim, StorageClass,
 * node labels; the target claim on restore), "nodeLocal" in the hello,
 * and API calls made by cairn on the plugin's behalf (plugin_cbs.kube).
 *
 * Whatever the plugin does (dies, hangs, writes garbage or a flood), the
 * call returns an error naming the plugin and what it did wrong, after
 * killing the plugin's whole process group and reaping it. Nothing the
 * plugin does can crash or block the caller past the limits below.
 *
 * Threads: every function may be called from any thread at once; each call
 * owns its child process. Callers must ignore SIGPIPE (cairn server and
 * node-agent do): a plugin that closes its stdin early must not kill us.
 */
#ifndef CAIRN_PLUGIN_H
#define CAIRN_PLUGIN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/err.h"

#define PLUGIN_PROTOCOL_VERSION	2	/* the highest cairn speaks */
#define PLUGIN_PROTOCOL_MIN	1	/* the lowest it still speaks */
#define PLUGIN_KUBE_REPLY_MAX	(1u << 20)	/* one kube-response line */
#define PLUGIN_NAME_MAX		64	/* hello.name */
#define PLUGIN_LINE_MAX		(64u << 10)	/* one line of plugin output */
#define PLUGIN_STDERR_KEEP	1024	/* tail of stderr kept for messages */
#define PLUGIN_MAX_TYPES	16	/* volumeTypes in a hello */
#define PLUGIN_PROPS_MAX	64	/* properties a plugin may report */

/* Limits of one run; 0 in a field means the default in brackets. */
struct plugin_limits {
	int64_t handshake_us;	/* start to hello [10 s] */
	int64_t idle_us;	/* longest silence after hello [5 min] */
	int64_t overall_us;	/* whole operation [24 h] */
	int64_t exit_grace_us;	/* after result, wait for exit [2 s] */
	unsigned lines_per_sec;	/* more lines than this in one second: flood [2000] */
};

/* What a plugin said in its hello. */
struct plugin_hello {
	char name[PLUGIN_NAME_MAX];
	int protocol;
	char *types[PLUGIN_MAX_TYPES + 1];	/* owned, NULL-terminated */
	/*
	 * The plugin works on the node holding the volume (reads its files):
	 * 1 unless a version 2 hello says "nodeLocal": false (a snapshotter
	 * that only talks to APIs), whose work any server may run.
	 */
	int node_local;
};
void plugin_hello_free(struct plugin_hello *h);
/* 1 if h lists type (exact, case-sensitive). */
int plugin_hello_handles(const struct plugin_hello *h, const char *type);

/* Reports during a run; any callback may be NULL. Called on the caller's thread. */
struct plugin_cbs {
	void (*progress)(void *arg, int64_t done, int64_t total);
	void (*property)(void *arg, const char *key, const char *value);
	/*
	 * Polled at least every 100 ms: non-zero stops the plugin like
	 * *stop does (CAIRN_ECANCELED), e.g. when the operation's claim or
	 * Lease is lost. May be NULL.
	 */
	int (*cancel)(void *arg);
	/*
	 * Protocol 2: the plugin asks for an API call. Return the answer,
	 * an object {"status": HTTP code, "body": the reply or a Status}
	 * (owned by the runner), or NULL for 403 "not allowed to this
	 * plugin". NULL callback: every call gets that 403.
	 */
	cJSON *(*kube)(void *arg, const char *method, const char *path,
	    const cJSON *body);
	void *arg;
};

/*
 * Run one operation of the plugin at path: handshake, send request (a JSON
 * object with "type" set, in protocol 2's form; borrowed; a version 1
 * plugin gets version 1's fields of it), relay progress and properties,
 * answer API calls (protocol 2), and return the result line in *result
 * (owned, cJSON_Delete) on success.
 * hello (may be NULL) receives the handshake. request NULL only shakes
 * hands (stdin closed after the hello; the plugin should exit 0).
 * Errors (the message always names the plugin path):
 *   CAIRN_ETIMEOUT  handshake, idle or overall limit passed
 *   CAIRN_EPROTO    invalid JSON, unknown line type, bad hello, protocol
 *                   version mismatch, line over PLUGIN_LINE_MAX, flood
 *   CAIRN_EFAIL     the plugin reported {"type":"error"} (its message), or
 *                   exited/died before a result (exit status, signal and
 *                   the tail of its stderr)
 *   CAIRN_ECANCELED *stop became non-zero
 *   CAIRN_EIO       could not start it (fork, exec, pipes)
 * In every case the plugin's process group is gone when this returns.
 * env_extra (may be NULL): NULL-terminated "K=V" strings added to the
 * scrubbed environment.
 */
int plugin_run(const char *path, const cJSON *request,
	const struct plugin_limits *lim, const struct plugin_cbs *cbs,
	char *const *env_extra, const atomic_int *stop,
	struct plugin_hello *hello, cJSON **result, struct cairn_err *err);

/* ---- The plugin directory --------------------------------------------- */

struct plugin_dir;

/*
 * Scan dir: every regular executable file (not starting with '.') is shaken
 * hands with (request NULL) to learn its name and volume types. A plugin
 * that fails its handshake is logged and left out; it is not an error.
 * Optional per-plugin settings: "<dir>/<file>.json", a JSON object of
 * strings passed as the request's "config". *out owned (plugin_dir_free).
 * A missing or unreadable dir is CAIRN_ENOTFOUND / CAIRN_EIO.
 */
int plugin_dir_open(const char *dir, const struct plugin_limits *lim,
	struct plugin_dir **out, struct cairn_err *err);
void plugin_dir_free(struct plugin_dir *pd);
size_t plugin_dir_count(const struct plugin_dir *pd);
/* Name (hello.name) of plugin i; borrowed. */
const char *plugin_dir_name(const struct plugin_dir *pd, size_t i);
/*
 * Find the plugin for a volume: by name when want is non-NULL (a PV
 * annotation cairn.io/volume-plugin), else the first (by file name) whose
 * hello lists type. Returns the index or -1.
 */
int plugin_dir_find(const struct plugin_dir *pd, const char *want,
	const char *type);
/* Executable path and config object (NULL if none) of plugin i; borrowed. */
const char *plugin_dir_path(const struct plugin_dir *pd, size_t i);
const cJSON *plugin_dir_config(const struct plugin_dir *pd, size_t i);
/* The protocol version plugin i said hello with. */
int plugin_dir_protocol(const struct plugin_dir *pd, size_t i);
/* Does plugin i work on the volume's node (plugin_hello.node_local)? */
int plugin_dir_node_local(const struct plugin_dir *pd, size_t i);

#endif

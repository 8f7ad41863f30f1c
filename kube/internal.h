/*
 * internal.h: what the kube/ source files share and the unit tests reach.
 * Nothing here is public API; see kube.h.
 */
#ifndef CAIRN_KUBE_INTERNAL_H
#define CAIRN_KUBE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/err.h"
#include "kube/kube.h"

/* ---- config.c ---- */

/*
 * The current bearer token of cfg, re-read from the token file when it
 * changed (checked at most once a second; force: check now). Owned copy,
 * NULL when the config has no token.
 */
char *kcfg_token(struct kube_config *cfg, int force);

/*
 * The user's credentials now, as owned copies: a bearer token (static,
 * from a token file, or from the exec plugin) and the exec plugin's
 * client certificate and key (PEM). force: re-read the token file, run
 * the plugin again (after a 401). The plugin runs when there is no
 * credential yet or it expired; its failure is CAIRN_EAUTH with the
 * plugin named. Certificates from the kubeconfig are in kcfg_tls().
 */
struct kcfg_auth {
	char *token;			/* NULL: none */
	unsigned char *cert;		/* NULL: none (NUL-terminated) */
	size_t cert_len;
	unsigned char *key;
	size_t key_len;
};
int kcfg_auth(struct kube_config *cfg, int force, struct kcfg_auth *out,
	struct cairn_err *err);
void kcfg_auth_free(struct kcfg_auth *a);

/* What the transport needs from the config (borrowed). */
struct kcfg_tls {
	const char *ca_file;
	const void *ca_data; size_t ca_len;
	const char *cert_file;
	const void *cert_data; size_t cert_len;
	const char *key_file;
	const void *key_data; size_t key_len;
	const char *tls_server_name;
	int insecure;
};
void kcfg_tls(const struct kube_config *cfg, struct kcfg_tls *out);

/*
 * How the client authenticates, for the transport's next request and for
 * a connection made outside libcurl (kube/exec.c: WebSocket), so both do
 * exactly the same: the bearer token (never over plain http; from the
 * kubeconfig, a token file, or the exec plugin, run when its credential
 * expired), the TLS material (the exec plugin's client certificate
 * instead of the kubeconfig's when it gave one), the user agent and the
 * request timeout. force_token: re-read the token file, run the plugin
 * again (after a 401). CAIRN_EAUTH when the plugin fails (err says why).
 * The server URL is kube_server(). Release with kube_auth_clear() (wipes
 * the token and the plugin's key; tls is valid until then).
 */
struct kube_auth {
	char *token;			/* owned; NULL: none */
	struct kcfg_tls tls;		/* the client's config, or exec_* */
	int https;
	const char *user_agent;		/* borrowed */
	int64_t timeout_us;		/* the client's request timeout */
	unsigned char *exec_cert;	/* owned: the plugin's certificate */
	unsigned char *exec_key;	/* owned: its key */
	size_t exec_key_len;
};
int kube_auth_get(struct kube *k, int force_token, struct kube_auth *out,
	struct cairn_err *err);
void kube_auth_clear(struct kube_auth *a);

/* ---- kube.c: the transport ---- */

/*
 * One HTTP exchange with retries. With sink set, the body of a 2xx reply is
 * streamed to sink (which returns 0, or a negative rc to abort); other
 * replies are buffered (capped) so the Status can be read.
 */
struct kube_call {
	const char *method;
	const char *path;		/* path and query */
	const char *content_type;	/* of body; NULL: application/json */
	const char *accept;		/* NULL: application/json */
	const char *body;
	size_t body_len;
	int idempotent;			/* may be re-sent after a connection failure */
	int64_t timeout_us;		/* 0: client default; < 0: none */
	int watch;			/* long-lived: takes no slot of its
					   flow's window (flow.c) */
	/*
	 * Streamed lists: no total timeout; instead the transfer fails when
	 * neither a byte arrived nor the sink returned for the client's
	 * request timeout (a slow consumer is not a stalled server).
	 */
	int idle_timeout;
	int no_retry;			/* never retry (watch: the caller does) */
	int max_retries;		/* > 0: at most this many (and at most
					   the client's); 0: the client's */
	int64_t max_delay_us;		/* > 0: no retry that would wait longer
					   (a Retry-After of minutes) */
	const atomic_int *stop;

	int (*sink)(void *arg, const char *p, size_t n);
	/* Before re-sending a streamed request: 0 go on, < 0 give up with it. */
	int (*rewind)(void *arg);
	void *sink_arg;
	int sink_rc;			/* what sink returned when it aborted */

	long http;			/* out: final HTTP status, 0 none */
	struct buf reply;		/* out: buffered body (no sink or not 2xx) */
};

/* Perform c (see above). Returns 0 on 2xx; else the mapped error. */
int kube_call_do(struct kube *k, struct kube_call *c, struct cairn_err *err);
/* Free c's reply buffer. */
void kube_call_done(struct kube_call *c);
/* kube_call_do + parse of the reply (empty: *out = NULL). */
int kube_call_json(struct kube *k, struct kube_call *c, cJSON **out,
	struct cairn_err *err);

/* Was kube_set_strict_fields(k, 1) called? */
int kube_strict_fields(const struct kube *k);

/* Map an HTTP status and Status reason to an enum cairn_rc. */
int kube_http_rc(long http, const char *reason);
/* Record the thread's last status. */
void kube_status_set(int http, int rc, const char *reason,
	const char *message, int64_t retry_after_s);

/* The discovery cache hanging on the client (discovery.c). */
struct kube_discovery *kube_disc_cached(struct kube *k);
void kube_disc_set(struct kube *k, struct kube_discovery *d);
int64_t kube_disc_loaded_at(struct kube *k);
void kube_disc_lock(struct kube *k);
void kube_disc_unlock(struct kube *k);
void kube_disc_ref(struct kube_discovery *d);

/* ---- flow.c: backing off per flow when the server pushes back ---- */

struct kube_flows;
struct kube_flows *kube_flows_new(void);
void kube_flows_free(struct kube_flows *f);
/*
 * The flow class of a request: "POST /secrets", "GET apps/deployments",
 * "PUT /pods/status", "GET (discovery)" (method, group, resource,
 * subresource; namespace and name left out). Truncated to cap.
 */
void kube_flow_key(const char *method, const char *path, char *out,
	size_t cap);
/*
 * Before sending: wait until the request's flow is not held (a 429's
 * Retry-After) and, when counted, has room in its window. Returns the
 * flow's slot for kube_flow_leave(), or CAIRN_ECANCELED when stop was set
 * meanwhile. Watches pass counted = 0.
 */
int kube_flow_enter(struct kube_flows *f, const char *method,
	const char *path, int counted, const atomic_int *stop);
/*
 * After the reply (http 0: none). A 429 holds the flow (and every flow
 * seen under the same priority level, pl from X-Kubernetes-PF-
 * PriorityLevel-UID) for hold_us from now and narrows its window;
 * another reply widens a narrowed window.
 */
void kube_flow_leave(struct kube_flows *f, int slot, int counted, long http,
	int64_t hold_us, const char *pl);
void kube_flows_stats(struct kube_flows *f, uint64_t *pushed_back,
	uint64_t *held_us);

/* Query-string helpers: append "&k=v" (v escaped) to b. */
void kube_query_add(struct buf *b, const char *key, const char *value);

/* ---- stream.c: splitting JSON byte streams ---- */

/*
 * jsplit: cuts a stream of JSON values (watch lines, or the elements of a
 * list's "items" array) into complete texts, whatever the chunk borders.
 * It only tracks strings, escapes and bracket depth; cJSON parses each
 * piece. One value is buffered at a time, capped.
 */
struct jsplit {
	struct buf cur;		/* the value being collected */
	int depth;		/* bracket depth inside cur */
	int in_str;		/* inside a string */
	int esc;		/* after a backslash in a string */
	int active;		/* collecting a value */
	int ws;			/* whitespace between tokens in cur */
	int maxdepth;		/* deepest bracket nesting in cur */
};
void jsplit_init(struct jsplit *s, size_t cap);
void jsplit_reset(struct jsplit *s);
void jsplit_free(struct jsplit *s);
/*
 * Feed n bytes of a stream of top-level values separated by whitespace
 * (newline-delimited JSON as watches send). fn gets each complete value
 * (text, len; not NUL-terminated beyond len... it is, see buf); a non-zero
 * return from fn stops and is returned. CAIRN_ETOOBIG past the cap,
 * CAIRN_EPROTO on a stray closing bracket or scalar at top level.
 */
int jsplit_feed(struct jsplit *s, const char *p, size_t n,
	int (*fn)(void *arg, const char *text, size_t len), void *arg);

/*
 * lsplit: a streamed List reply {"apiVersion", "kind", "metadata":{...},
 * "items":[...]}. Each element of "items" goes to fn as soon as it is
 * complete; everything else is kept (small) as the envelope, parsed at the
 * end, wherever "items" sits among the keys.
 */
struct lsplit {
	struct jsplit item;	/* the item being collected */
	struct buf env;		/* envelope text with "items" emptied */
	struct buf key;		/* last key at depth 1 */
	int state;		/* internal */
	int depth;		/* depth in the envelope */
	int in_str, esc;
	int key_mode;		/* collecting a depth-1 key string */
	int expect_key;		/* next depth-1 string is a key */
	int in_items;		/* inside the items array */
	int items_seen;		/* "items" key was present */
	char api_version[128];	/* from the envelope when seen before items */
	char kind[128];
};
void lsplit_init(struct lsplit *l, size_t item_cap);
void lsplit_free(struct lsplit *l);
void lsplit_reset(struct lsplit *l);
int lsplit_feed(struct lsplit *l, const char *p, size_t n,
	int (*fn)(void *arg, const char *text, size_t len), void *arg);
/* After the last byte: parse the envelope. Owned, or NULL with err. */
cJSON *lsplit_finish(struct lsplit *l, struct cairn_err *err);

/* ---- list.c: one list's delivery (also for lists.c) ---- */

/*
 * The query of one page: base?limit=&selectors&continue= (or the
 * resourceVersion for a first page), into q.
 */
int kube_list_query(struct buf *q, const char *base, int limit,
	const struct kube_list_opts *o, const char *cont,
	struct cairn_err *err);
/*
 * The continue token of a 410's Status (metadata.continue): the API
 * server's inconsistent continue token, which lists the rest of the
 * collection at its latest state. Owned, or NULL.
 */
char *kube_list_gone_token(const struct buf *reply);

/*
 * struct lst: what kube_list()/kube_list_text() do with a list's items,
 * for any fetcher: parse what the caller asked for, skip by key after a
 * rewind or a 410, fill apiVersion/kind, call fn (or tfn with the text).
 * The caller's thread streams a page through it (list.c: lsplit); the
 * fetchers of lists.c split pages themselves and hand items over as
 * records. r, o (its parse_only, on_too_deep) and info are borrowed for
 * its life; info is zeroed here.
 */
struct lst;
struct lst *lst_new(struct kube *k, const struct kube_gvr *r,
	const struct kube_list_opts *o, kube_item_fn fn,
	kube_item_text_fn tfn, void *arg, struct kube_list_info *info,
	struct cairn_err *err);
void lst_free(struct lst *l);
/* A page starts. */
void lst_page_begin(struct lst *l);
/* The page is sent again from its start: what it gave is skipped by key. */
void lst_page_rewind(struct lst *l);
/* The list goes on after a 410: items up to the last delivered are skipped. */
void lst_skip_delivered(struct lst *l);
/*
 * One item split out by a fetcher: its text (NUL after len), whether it
 * had whitespace between tokens and how deep it nests (jsplit's ws,
 * maxdepth). The callback's non-zero return or a parse error.
 */
int lst_record(struct lst *l, const char *text, size_t len, int ws,
	int depth);
/* The page's list apiVersion and kind, as its envelope gave them. */
void lst_page_env(struct lst *l, const char *api_version, const char *kind);
/* The page is complete: its resourceVersion into info, pages counted. */
void lst_page_done(struct lst *l, const char *resource_version);

/* ---- lists.c ---- */

/* kube_lists_take() with either callback (fn: kube_list's). */
int lists_take(struct kube_lists *m, int id, kube_item_fn fn,
	kube_item_text_fn tfn, void *arg, struct kube_list_info *info,
	struct cairn_err *err);

/* ---- watch.c / informer ---- */
int kube_event_type_parse(const char *s, enum kube_event_type *out);

#endif

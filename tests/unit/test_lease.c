/*
 * test_lease.c: engine/lease.c against a small in-process Lease API
 * (libmicrohttpd): create/renew/release, another holder, the renew
 * deadline counted from when the renewal was sent, holding epochs, and
 * the observation clock of lease_watch.
 */
#include "config.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonutil.h"
#include "base/mem.h"
#include "base/timeutil.h"
#include "engine/lease.h"
#include "kube/kube.h"
#include "unit.h"
#include "unit_kube.h"

#define FAKE_MAX 8
#define FAKE_BODY_MAX (64u << 10)
#define PREFIX "/apis/coordination.k8s.io/v1/namespaces/ns/leases"

/* The fake API server: Leases by name with resourceVersions. */
static struct {
	pthread_mutex_t mu;
	cJSON *obj[FAKE_MAX];
	long rv;
	int64_t stall_us;		/* delay every answer by this much */
	int puts, posts;
} fake = { PTHREAD_MUTEX_INITIALIZER, { NULL }, 100, 0, 0, 0 };

struct upload {
	char *data;
	size_t len;
};

static int
fake_find(const char *name)
{
	for (int i = 0; i < FAKE_MAX; i++)
		if (fake.obj[i] != NULL && strcmp(json_str_or(fake.obj[i],
		    "metadata.name", ""), name) == 0)
			return i;
	return -1;
}

/* Store obj (taken) as a new version: fresh RV. */
static void
fake_put(int slot, cJSON *obj)
{
	char rv[32];

	snprintf(rv, sizeof rv, "%ld", ++fake.rv);
	json_set_str(obj, "metadata.resourceVersion", rv);
	if (slot < 0)
		for (slot = 0; slot < FAKE_MAX && fake.obj[slot] != NULL; slot++)
			;
	cJSON_Delete(fake.obj[slot]);
	fake.obj[slot] = obj;
}

static enum MHD_Result
reply(struct MHD_Connection *c, int code, cJSON *body)
{
	char *text = body ? cJSON_PrintUnformatted(body) : xstrdup("{}");
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text),
	    text, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, (unsigned)code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
status_reply(struct MHD_Connection *c, int code, const char *reason)
{
	cJSON *s = cJSON_CreateObject();
	enum MHD_Result ret;

	cJSON_AddStringToObject(s, "kind", "Status");
	cJSON_AddStringToObject(s, "status", "Failure");
	cJSON_AddStringToObject(s, "reason", reason);
	cJSON_AddNumberToObject(s, "code", code);
	ret = reply(c, code, s);
	cJSON_Delete(s);
	return ret;
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url,
	const char *method, const char *version, const char *data,
	size_t *data_len, void **con_cls)
{
	struct upload *u = *con_cls;
	const char *name = NULL;
	cJSON *in = NULL, *out = NULL;
	enum MHD_Result ret;
	int i;

	(void)cls;
	(void)version;
	if (u == NULL) {
		*con_cls = xcalloc(1, sizeof *u);
		return MHD_YES;
	}
	if (*data_len > 0) {
		if (u->len + *data_len > FAKE_BODY_MAX)
			return MHD_NO;
		u->data = xrealloc(u->data, u->len + *data_len + 1);
		memcpy(u->data + u->len, data, *data_len);
		u->len += *data_len;
		u->data[u->len] = '\0';
		*data_len = 0;
		return MHD_YES;
	}
	if (fake.stall_us > 0)
		time_sleep_us(fake.stall_us, NULL);
	if (strncmp(url, PREFIX, strlen(PREFIX)) != 0)
		return status_reply(c, 404, "NotFound");
	if (url[strlen(PREFIX)] == '/')
		name = url + strlen(PREFIX) + 1;
	if (u->data != NULL)
		in = cJSON_Parse(u->data);
	pthread_mutex_lock(&fake.mu);
	if (strcmp(method, "GET") == 0 && name == NULL) {
		out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "kind", "LeaseList");
		json_set_str(out, "metadata.resourceVersion", "1");
		cJSON *items = cJSON_AddArrayToObject(out, "items");
		for (i = 0; i < FAKE_MAX; i++)
			if (fake.obj[i] != NULL)
				cJSON_AddItemToArray(items,
				    cJSON_Duplicate(fake.obj[i], 1));
		ret = reply(c, 200, out);
	} else if (strcmp(method, "GET") == 0) {
		i = fake_find(name);
		ret = i < 0 ? status_reply(c, 404, "NotFound") :
		    reply(c, 200, fake.obj[i]);
	} else if (strcmp(method, "POST") == 0 && in != NULL) {
		fake.posts++;
		if (fake_find(json_str_or(in, "metadata.name", "")) >= 0)
			ret = status_reply(c, 409, "AlreadyExists");
		else {
			fake_put(-1, cJSON_Duplicate(in, 1));
			ret = reply(c, 201, fake.obj[fake_find(json_str_or(in,
			    "metadata.name", ""))]);
		}
	} else if (strcmp(method, "PUT") == 0 && in != NULL && name != NULL) {
		fake.puts++;
		i = fake_find(name);
		if (i < 0)
			ret = status_reply(c, 404, "NotFound");
		else if (strcmp(json_str_or(in, "metadata.resourceVersion", ""),
		    json_str_or(fake.obj[i], "metadata.resourceVersion", "")))
			ret = status_reply(c, 409, "Conflict");
		else {
			fake_put(i, cJSON_Duplicate(in, 1));
			ret = reply(c, 200, fake.obj[i]);
		}
	} else
		ret = status_reply(c, 405, "MethodNotAllowed");
	pthread_mutex_unlock(&fake.mu);
	cJSON_Delete(in);
	cJSON_Delete(out);
	return ret;
}

static void
done_cb(void *cls, struct MHD_Connection *c, void **con_cls,
	enum MHD_RequestTerminationCode toe)
{
	struct upload *u = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (u != NULL) {
		free(u->data);
		free(u);
	}
	*con_cls = NULL;
}

static struct MHD_Daemon *daemon_;
static struct kube *kube_;

static void
fake_reset(void)
{
	pthread_mutex_lock(&fake.mu);
	for (int i = 0; i < FAKE_MAX; i++) {
		cJSON_Delete(fake.obj[i]);
		fake.obj[i] = NULL;
	}
	fake.stall_us = 0;
	fake.puts = fake.posts = 0;
	pthread_mutex_unlock(&fake.mu);
}

static int
setup(void)
{
	const union MHD_DaemonInfo *di;

	daemon_ = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION |
	    MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handler, NULL,
	    MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL, MHD_OPTION_END);
	if (daemon_ == NULL)
		return -1;
	di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
	kube_ = unit_kube_at(di->port, "ns", "lease");
	return kube_ != NULL ? 0 : -1;
}

static struct lease *
mk(const char *id, int64_t dur_ms, int64_t dl_ms, int64_t rp_ms)
{
	struct lease_opts o = { "ns", id, dur_ms * 1000, dl_ms * 1000,
	    rp_ms * 1000 };
	struct lease *l = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;

	if (lease_new(kube_, &o, &l, &err) < 0)
		fprintf(stderr, "lease_new: %s\n", err.msg);
	return l;
}

static void
test_validation(void)
{
	struct lease_opts o = { "ns", "a", 3000000, 3000000, 500000 };
	struct lease *l = NULL;
	struct cairn_err err = CAIRN_ERR_INIT;

	CHECK_INT(lease_new(kube_, &o, &l, &err), CAIRN_EINVAL);
	CHECK(l == NULL);
	o.renew_deadline_us = 2000000;
	o.retry_period_us = 2000000;
	CHECK_INT(lease_new(kube_, &o, &l, &err), CAIRN_EINVAL);
	o.retry_period_us = 500000;
	o.identity = "";
	CHECK_INT(lease_new(kube_, &o, &l, &err), CAIRN_EINVAL);
	o.identity = "a";
	CHECK_INT(lease_new(kube_, &o, &l, &err), 0);
	CHECK(l != NULL && !lease_held(l) && lease_write_epoch(l) == 0);
	lease_free(l);
}

static void
test_acquire_renew_release(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct lease *l, *other;
	struct lease_state st;
	int e1;

	fake_reset();
	l = mk("a", 3000, 2000, 500);
	REQUIRE(l != NULL);
	CHECK_INT(lease_try(l, &err), 0);
	CHECK_INT(fake.posts, 1);
	CHECK(lease_held(l));
	e1 = lease_write_epoch(l);
	CHECK(e1 > 0);
	pthread_mutex_lock(&fake.mu);
	CHECK_STR(json_str_or(fake.obj[0], "spec.holderIdentity", ""), "a");
	CHECK_INT(json_int(fake.obj[0], "spec.leaseDurationSeconds", 0), 3);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
	    json_get(fake.obj[0], "metadata.labels"), LEASE_LABEL_KEY)),
	    "true");
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT(lease_try(l, &err), 0);	/* renew: PUT with the RV */
	CHECK_INT(fake.puts, 1);
	CHECK_INT(lease_write_epoch(l), e1);	/* no lapse: same period */
	lease_snapshot(l, &st);
	CHECK(st.held && st.renewals == 2 && st.failures == 0);

	/* Same name held by someone else (two servers, one id): EBUSY. */
	pthread_mutex_lock(&fake.mu);
	json_set_str(fake.obj[0], "spec.holderIdentity", "intruder");
	pthread_mutex_unlock(&fake.mu);
	other = mk("a", 3000, 2000, 500);
	CHECK_INT(lease_try(other, &err), CAIRN_EBUSY);
	CHECK(!lease_held(other));
	lease_free(other);
	/* our cached renewal now conflicts (RV unchanged? the intruder edit
	 * kept it) and the fresh read shows the intruder: not ours */
	pthread_mutex_lock(&fake.mu);
	json_set_str(fake.obj[0], "spec.holderIdentity", "a");
	pthread_mutex_unlock(&fake.mu);

	CHECK_INT(lease_release(l, &err), 0);
	CHECK(!lease_held(l));
	pthread_mutex_lock(&fake.mu);
	CHECK_STR(json_str_or(fake.obj[0], "spec.holderIdentity", "?"), "");
	CHECK_INT(json_int(fake.obj[0], "spec.leaseDurationSeconds", 0), 1);
	pthread_mutex_unlock(&fake.mu);
	CHECK_INT(lease_release(l, &err), 0);	/* twice is fine */
	lease_free(l);
}

/*
 * The renew deadline counts from when the renewal was sent: a renewal
 * whose answer took 300 ms leaves 400 - 300 ms of writing, not 400.
 */
static void
test_deadline_from_send(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct lease *l;
	int64_t t0;

	fake_reset();
	l = mk("slow", 800, 400, 100);
	REQUIRE(l != NULL);
	fake.stall_us = 300000;
	t0 = time_mono_us();
	CHECK_INT(lease_try(l, &err), 0);
	CHECK(time_mono_us() - t0 >= 300000);
	fake.stall_us = 0;
	CHECK(lease_held(l));
	time_sleep_us(200000, NULL);	/* 500 ms after sending */
	CHECK(!lease_held(l));
	CHECK(lease_write_epoch(l) == 0);
	lease_free(l);
}

/* A lapse nobody observed still starts a new holding period. */
static void
test_epoch_after_lapse(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct lease *l;
	int e1, e2;

	fake_reset();
	l = mk("ep", 800, 300, 100);
	REQUIRE(l != NULL);
	CHECK_INT(lease_try(l, &err), 0);
	e1 = lease_write_epoch(l);
	time_sleep_us(100000, NULL);
	CHECK_INT(lease_try(l, &err), 0);
	CHECK_INT(lease_write_epoch(l), e1);
	time_sleep_us(350000, NULL);	/* past the deadline, unobserved */
	CHECK_INT(lease_try(l, &err), 0);
	e2 = lease_write_epoch(l);
	CHECK(e2 > 0 && e2 != e1);
	lease_free(l);
}

/* The observation clock: expiry judged by when the record last changed. */
static void
test_watch(void)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct lease_watch *w;
	struct lease *b;
	cJSON *servers;

	fake_reset();
	w = lease_watch_new(kube_, "ns", 300000);
	CHECK_INT(lease_watch_expired(w, "b"), 0);	/* before any refresh */
	b = mk("b", 1000, 600, 100);
	REQUIRE(b != NULL);
	CHECK_INT(lease_try(b, &err), 0);
	CHECK_INT(lease_watch_refresh(w, &err), 0);
	CHECK_INT(lease_watch_expired(w, "b"), 0);
	/* renewals keep it alive past its duration */
	for (int i = 0; i < 6; i++) {
		time_sleep_us(250000, NULL);
		CHECK_INT(lease_try(b, &err), 0);
		CHECK_INT(lease_watch_refresh(w, &err), 0);
	}
	CHECK_INT(lease_watch_expired(w, "b"), 0);
	/* no more renewals: expired one duration after the last change seen */
	time_sleep_us(700000, NULL);
	CHECK_INT(lease_watch_refresh(w, &err), 0);
	CHECK_INT(lease_watch_expired(w, "b"), 0);
	time_sleep_us(400000, NULL);
	CHECK_INT(lease_watch_refresh(w, &err), 0);
	CHECK_INT(lease_watch_expired(w, "b"), 1);
	servers = lease_watch_servers(w);
	CHECK_INT(cJSON_GetArraySize(servers), 1);
	CHECK_STR(json_str_or(cJSON_GetArrayItem(servers, 0), "id", ""), "b");
	cJSON_Delete(servers);
	/* renewed again: alive; released: expired at once */
	CHECK_INT(lease_try(b, &err), 0);
	CHECK_INT(lease_watch_refresh(w, &err), 0);
	CHECK_INT(lease_watch_expired(w, "b"), 0);
	CHECK_INT(lease_release(b, &err), 0);
	CHECK_INT(lease_watch_refresh(w, &err), 0);
	CHECK_INT(lease_watch_expired(w, "b"), 1);
	/* never seen: expired after the default duration since first asked */
	CHECK_INT(lease_watch_expired(w, "ghost"), 0);
	time_sleep_us(350000, NULL);
	CHECK_INT(lease_watch_expired(w, "ghost"), 1);
	lease_free(b);
	lease_watch_free(w);
}

int
main(void)
{
	if (setup() < 0) {
		printf("FAIL: test_lease: cannot start the fake API server\n");
		return 1;
	}
	RUN(test_validation);
	RUN(test_acquire_renew_release);
	RUN(test_deadline_from_send);
	RUN(test_epoch_after_lapse);
	RUN(test_watch);
	kube_free(kube_);
	MHD_stop_daemon(daemon_);
	fake_reset();
	return unit_done();
}

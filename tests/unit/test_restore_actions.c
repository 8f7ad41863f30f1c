/*
 * test_restore_actions.c: Velero's restore item actions (issue 18) on
 * objects as a real cluster returns them: what is skipped, what is
 * dropped before the create, and that the same cleaning makes a live
 * object (with what the cluster assigned again) equal to the backed-up
 * one.
 */
#include "config.h"
#include "engine/restore_actions.h"
#include "base/jsonutil.h"
#include "base/mem.h"
#include "tests/unit/unit.h"

static cJSON *
obj(const char *text)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	cJSON *j = json_parse(text, strlen(text), &err);

	if (j == NULL)
		fprintf(stderr, "bad test JSON: %s: %s\n", err.msg, text);
	return j;
}

/* ract_clean() of text, printed compactly. Owned. */
static char *
cleaned(const char *resgroup, const char *text, int preserve)
{
	struct ract_opts o = { preserve };
	cJSON *j = obj(text);
	char *t;

	ract_clean(resgroup, j, &o);
	t = json_print(j);
	cJSON_Delete(j);
	return t;
}

#define CHECK_CLEAN(rg, in, want, preserve) do {			\
	char *t_ = cleaned((rg), (in), (preserve));			\
	CHECK_STR(t_, (want));						\
	free(t_);							\
} while (0)

static void
test_skip(void)
{
	static const struct { const char *rg, *text, *why; } c[] = {
		{ "pods", "{\"status\":{\"phase\":\"Succeeded\"}}",
		  "the pod has finished (phase Succeeded)" },
		{ "pods", "{\"status\":{\"phase\":\"Failed\"}}",
		  "the pod has finished (phase Failed)" },
		{ "pods", "{\"status\":{\"phase\":\"Running\"}}", NULL },
		{ "pods", "{\"metadata\":{\"annotations\":{"
		  "\"kubernetes.io/config.mirror\":\"abc\"}}}",
		  "a mirror pod (the kubelet makes it from a static pod manifest)" },
		{ "jobs.batch", "{\"status\":{\"completionTime\":"
		  "\"2024-01-01T00:00:00Z\",\"succeeded\":1}}",
		  "the job has completed" },
		{ "jobs.batch", "{\"status\":{\"active\":1}}", NULL },
		{ "apiservices.apiregistration.k8s.io", "{\"metadata\":{\"labels\":"
		  "{\"kube-aggregator.kubernetes.io/automanaged\":\"onstart\"}}}",
		  "an APIService Kubernetes manages itself" },
		{ "apiservices.apiregistration.k8s.io", "{\"metadata\":{}}", NULL },
		{ "configmaps", "{\"status\":{\"phase\":\"Succeeded\"}}", NULL },
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		cJSON *j = obj(c[i].text);
		const char *why = ract_skip(c[i].rg, j);

		if (c[i].why == NULL)
			CHECK(why == NULL);
		else
			CHECK(why != NULL && strcmp(why, c[i].why) == 0);
		cJSON_Delete(j);
	}
}

static void
test_pod(void)
{
	/* a pod as the API returns it: node, priority, the admission's
	 * projected token volume mounted in each container */
	CHECK_CLEAN("pods",
	    "{\"spec\":{\"nodeName\":\"n1\",\"priority\":1000,"
	    "\"serviceAccountName\":\"runner\","
	    "\"volumes\":[{\"name\":\"data\",\"persistentVolumeClaim\":"
	    "{\"claimName\":\"d\"}},{\"name\":\"kube-api-access-x7k2p\","
	    "\"projected\":{\"sources\":[{\"serviceAccountToken\":"
	    "{\"path\":\"token\"}},{\"configMap\":{\"name\":"
	    "\"kube-root-ca.crt\"}}]}},{\"name\":\"runner-token-abcde\","
	    "\"secret\":{\"secretName\":\"runner-token-abcde\"}},"
	    "{\"name\":\"kube-api-access-mine\",\"configMap\":{\"name\":\"c\"}}],"
	    "\"initContainers\":[{\"name\":\"i\",\"volumeMounts\":[{\"name\":"
	    "\"kube-api-access-x7k2p\",\"mountPath\":\"/var/run/secrets\"}]}],"
	    "\"containers\":[{\"name\":\"c\",\"volumeMounts\":[{\"name\":"
	    "\"data\",\"mountPath\":\"/d\"},{\"name\":\"kube-api-access-x7k2p\","
	    "\"mountPath\":\"/var/run/secrets\"},{\"name\":"
	    "\"runner-token-abcde\",\"mountPath\":\"/t\"}]}]}}",
	    "{\"spec\":{\"serviceAccountName\":\"runner\",\"volumes\":[{\"name\":"
	    "\"data\",\"persistentVolumeClaim\":{\"claimName\":\"d\"}},"
	    "{\"name\":\"kube-api-access-mine\",\"configMap\":{\"name\":\"c\"}}],"
	    "\"initContainers\":[{\"name\":\"i\"}],\"containers\":[{\"name\":"
	    "\"c\",\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/d\"}]}]}}",
	    0);
	/* no service account named: the default one's token volume */
	CHECK_CLEAN("pods",
	    "{\"spec\":{\"volumes\":[{\"name\":\"default-token-q\",\"secret\":{}}]}}",
	    "{\"spec\":{}}", 0);
}

static void
test_job(void)
{
	/* a Job as the batch strategy made it */
	CHECK_CLEAN("jobs.batch",
	    "{\"spec\":{\"selector\":{\"matchLabels\":{"
	    "\"batch.kubernetes.io/controller-uid\":\"u1\"}},"
	    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"x\","
	    "\"controller-uid\":\"u1\",\"batch.kubernetes.io/controller-uid\":"
	    "\"u1\",\"job-name\":\"j\",\"batch.kubernetes.io/job-name\":\"j\"}},"
	    "\"spec\":{}}}}",
	    "{\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"app\":\"x\","
	    "\"job-name\":\"j\",\"batch.kubernetes.io/job-name\":\"j\"}},"
	    "\"spec\":{}}}}", 0);
	/* a user's own selector (manualSelector) stays */
	CHECK_CLEAN("jobs.batch",
	    "{\"spec\":{\"manualSelector\":true,\"selector\":{\"matchLabels\":"
	    "{\"app\":\"x\"}},\"template\":{\"metadata\":{\"labels\":"
	    "{\"app\":\"x\"}}}}}",
	    "{\"spec\":{\"manualSelector\":true,\"selector\":{\"matchLabels\":"
	    "{\"app\":\"x\"}},\"template\":{\"metadata\":{\"labels\":"
	    "{\"app\":\"x\"}}}}}", 0);
}

static void
test_service(void)
{
	/* assigned IP and node ports go */
	CHECK_CLEAN("services",
	    "{\"spec\":{\"type\":\"NodePort\",\"clusterIP\":\"10.0.0.5\","
	    "\"clusterIPs\":[\"10.0.0.5\"],\"ports\":[{\"name\":\"http\","
	    "\"port\":80,\"protocol\":\"TCP\",\"nodePort\":31234}]}}",
	    "{\"spec\":{\"type\":\"NodePort\",\"ports\":[{\"name\":\"http\","
	    "\"port\":80,\"protocol\":\"TCP\"}]}}", 0);
	/* headless stays headless; preserveNodePorts keeps the port */
	CHECK_CLEAN("services",
	    "{\"spec\":{\"clusterIP\":\"None\",\"clusterIPs\":[\"None\"],"
	    "\"ports\":[{\"port\":80,\"nodePort\":31234}]}}",
	    "{\"spec\":{\"clusterIP\":\"None\",\"clusterIPs\":[\"None\"],"
	    "\"ports\":[{\"port\":80,\"nodePort\":31234}]}}", 1);
	/* ports the user set with kubectl apply stay, the others go */
	CHECK_CLEAN("services",
	    "{\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/"
	    "last-applied-configuration\":\"{\\\"spec\\\":{\\\"ports\\\":"
	    "[{\\\"name\\\":\\\"http\\\",\\\"port\\\":80,\\\"nodePort\\\":"
	    "30080},{\\\"port\\\":81,\\\"nodePort\\\":30081}]}}\"}},"
	    "\"spec\":{\"type\":\"NodePort\",\"ports\":[{\"name\":\"http\","
	    "\"port\":80,\"nodePort\":30080},{\"name\":\"admin\",\"port\":90,"
	    "\"nodePort\":31999},{\"port\":81,\"nodePort\":30081}]}}",
	    "{\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/"
	    "last-applied-configuration\":\"{\\\"spec\\\":{\\\"ports\\\":"
	    "[{\\\"name\\\":\\\"http\\\",\\\"port\\\":80,\\\"nodePort\\\":"
	    "30080},{\\\"port\\\":81,\\\"nodePort\\\":30081}]}}\"}},"
	    "\"spec\":{\"type\":\"NodePort\",\"ports\":[{\"name\":\"http\","
	    "\"port\":80,\"nodePort\":30080},{\"name\":\"admin\",\"port\":90},"
	    "{\"port\":81,\"nodePort\":30081}]}}", 0);
	/* ... or with server-side apply (managedFields) */
	CHECK_CLEAN("services",
	    "{\"metadata\":{\"managedFields\":[{\"manager\":\"kubectl\","
	    "\"fieldsV1\":{\"f:spec\":{\"f:ports\":{\"k:{\\\"port\\\":80,"
	    "\\\"protocol\\\":\\\"TCP\\\"}\":{\"f:nodePort\":{}}},"
	    "\"f:healthCheckNodePort\":{}}}}]},"
	    "\"spec\":{\"type\":\"LoadBalancer\",\"externalTrafficPolicy\":"
	    "\"Local\",\"healthCheckNodePort\":32000,\"ports\":[{\"port\":80,"
	    "\"protocol\":\"TCP\",\"nodePort\":30080},{\"port\":443,"
	    "\"protocol\":\"TCP\",\"nodePort\":30443}]}}",
	    "{\"metadata\":{\"managedFields\":[{\"manager\":\"kubectl\","
	    "\"fieldsV1\":{\"f:spec\":{\"f:ports\":{\"k:{\\\"port\\\":80,"
	    "\\\"protocol\\\":\\\"TCP\\\"}\":{\"f:nodePort\":{}}},"
	    "\"f:healthCheckNodePort\":{}}}}]},"
	    "\"spec\":{\"type\":\"LoadBalancer\",\"externalTrafficPolicy\":"
	    "\"Local\",\"healthCheckNodePort\":32000,\"ports\":[{\"port\":80,"
	    "\"protocol\":\"TCP\",\"nodePort\":30080},{\"port\":443,"
	    "\"protocol\":\"TCP\"}]}}", 0);
	/* an assigned healthCheckNodePort goes */
	CHECK_CLEAN("services",
	    "{\"spec\":{\"type\":\"LoadBalancer\",\"externalTrafficPolicy\":"
	    "\"Local\",\"healthCheckNodePort\":32000}}",
	    "{\"spec\":{\"type\":\"LoadBalancer\",\"externalTrafficPolicy\":"
	    "\"Local\"}}", 0);
}

static void
test_volumes_and_secrets(void)
{
	CHECK_CLEAN("persistentvolumes",
	    "{\"metadata\":{\"annotations\":{\"pv.kubernetes.io/"
	    "bound-by-controller\":\"yes\",\"pv.kubernetes.io/provisioned-by\":"
	    "\"rancher.io/local-path\"}},\"spec\":{\"claimRef\":{\"kind\":"
	    "\"PersistentVolumeClaim\",\"namespace\":\"app\",\"name\":\"data\","
	    "\"uid\":\"u\",\"resourceVersion\":\"7\"}}}",
	    "{\"metadata\":{\"annotations\":{\"pv.kubernetes.io/provisioned-by\":"
	    "\"rancher.io/local-path\"}},\"spec\":{\"claimRef\":{\"kind\":"
	    "\"PersistentVolumeClaim\",\"namespace\":\"app\",\"name\":"
	    "\"data\"}}}", 0);
	CHECK_CLEAN("persistentvolumeclaims",
	    "{\"metadata\":{\"annotations\":{\"pv.kubernetes.io/bind-completed\":"
	    "\"yes\",\"pv.kubernetes.io/bound-by-controller\":\"yes\","
	    "\"volume.kubernetes.io/storage-provisioner\":\"p\","
	    "\"volume.beta.kubernetes.io/storage-provisioner\":\"p\","
	    "\"volume.kubernetes.io/selected-node\":\"n1\",\"keep\":\"me\"}},"
	    "\"spec\":{\"volumeName\":\"pv1\"}}",
	    "{\"metadata\":{\"annotations\":{\"keep\":\"me\"}},\"spec\":"
	    "{\"volumeName\":\"pv1\"}}", 0);
	CHECK_CLEAN("secrets",
	    "{\"type\":\"kubernetes.io/service-account-token\",\"metadata\":"
	    "{\"annotations\":{\"kubernetes.io/service-account.name\":\"ci\","
	    "\"kubernetes.io/service-account.uid\":\"u\"}},\"data\":{\"token\":"
	    "\"dA==\",\"ca.crt\":\"Yw==\",\"namespace\":\"YXBw\"}}",
	    "{\"type\":\"kubernetes.io/service-account-token\",\"metadata\":"
	    "{\"annotations\":{\"kubernetes.io/service-account.name\":\"ci\"}},"
	    "\"data\":{\"namespace\":\"YXBw\"}}", 0);
	CHECK_CLEAN("secrets",
	    "{\"type\":\"Opaque\",\"data\":{\"token\":\"dA==\"}}",
	    "{\"type\":\"Opaque\",\"data\":{\"token\":\"dA==\"}}", 0);
}

/* The same cleaning on a live object makes it compare equal. */
static void
test_live_compares_equal(void)
{
	struct ract_opts o = { 0 };
	cJSON *backed = obj("{\"spec\":{\"selector\":{\"matchLabels\":{"
	    "\"batch.kubernetes.io/controller-uid\":\"old\"}},\"template\":"
	    "{\"metadata\":{\"labels\":{\"batch.kubernetes.io/controller-uid\":"
	    "\"old\",\"job-name\":\"j\"}}}}}");
	cJSON *live = obj("{\"spec\":{\"selector\":{\"matchLabels\":{"
	    "\"batch.kubernetes.io/controller-uid\":\"new\"}},\"template\":"
	    "{\"metadata\":{\"labels\":{\"batch.kubernetes.io/controller-uid\":"
	    "\"new\",\"job-name\":\"j\"}}}}}");

	CHECK(!cJSON_Compare(backed, live, 1));
	ract_clean("jobs.batch", backed, &o);
	ract_clean("jobs.batch", live, &o);
	CHECK(cJSON_Compare(backed, live, 1));
	cJSON_Delete(backed);
	cJSON_Delete(live);
}

int
main(void)
{
	RUN(test_skip);
	RUN(test_pod);
	RUN(test_job);
	RUN(test_service);
	RUN(test_volumes_and_secrets);
	RUN(test_live_compares_equal);
	return unit_done();
}

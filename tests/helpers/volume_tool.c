/*
 * volume_tool.c: calls into engine/volumes.h that no command makes yet,
 * for the integration tests.
 *
 *   volume_tool delete-backup KUBECONFIG NAMESPACE PLUGIN_DIR BACKUP
 *       volumes_delete_backup(): plugins delete their snapshots of the
 *       backup, its VolumePluginBackups are deleted. Prints
 *       "failed N" and exits 0, or the error and 1.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "engine/volumes.h"
#include "kube/kube.h"

int
main(int argc, char **argv)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct kube_config_opts co = { NULL, NULL };
	struct kube_config *cfg = NULL;
	struct volumes_config vc;
	struct volumes_ctx c;
	struct kube *k = NULL;
	cJSON *b = NULL;
	int failed = 0, rc = 1;

	signal(SIGPIPE, SIG_IGN);
	if (argc != 6 || strcmp(argv[1], "delete-backup") != 0) {
		fprintf(stderr, "usage: volume_tool delete-backup KUBECONFIG "
		    "NS PLUGIN_DIR BACKUP\n");
		return 2;
	}
	co.kubeconfig = argv[2];
	memset(&vc, 0, sizeof vc);
	vc.plugin_dir = argv[4];
	memset(&c, 0, sizeof c);
	if (volumes_open(&vc, &c.vol, &err) < 0 ||
	    kube_config_load(&co, &cfg, &err) < 0 ||
	    kube_new(cfg, NULL, &k, &err) < 0)
		goto out;
	if (kube_get(k, &KUBE_GVR("cairn.io", "v1", "backups"), argv[3],
	    argv[5], &b, &err) < 0)
		goto out;
	c.kube = k;
	c.namespace = argv[3];
	c.server_id = "volume-tool";
	if (volumes_delete_backup(&c, b, &failed, &err) < 0)
		goto out;
	printf("failed %d\n", failed);
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "%s\n", err.msg);
	cJSON_Delete(b);
	kube_free(k);
	volumes_free(c.vol);
	return rc;
}

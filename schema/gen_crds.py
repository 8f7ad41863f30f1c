#!/usr/bin/env python3
"""gen_crds.py: writes schema/crds/*.yaml, the cairn.io/v1 CustomResourceDefinitions.

This file is the source of truth for cairn's CRDs and for docs/objects.md:
edit it, run `python3 schema/gen_crds.py` and commit all three. Field names follow Velero's
velero.io/v1 types wherever the concept is the same (see docs/objects.md);
cairn's additions are status.claim, status.checkpoint, status.progress and
status.conditions. Standard library only (a tiny YAML emitter below), so
the output is byte-for-byte reproducible.
"""
import os
import sys

GROUP = "cairn.io"
HERE = os.path.dirname(os.path.abspath(__file__))


# ---- schema building blocks ------------------------------------------------
def s(desc=None, **kw):
    d = {"type": "string"}
    if desc:
        d["description"] = desc
    d.update(kw)
    return d


def i(desc=None, minimum=0, **kw):
    d = {"type": "integer", "format": "int64"}
    if minimum is not None:
        d["minimum"] = minimum
    if desc:
        d["description"] = desc
    d.update(kw)
    return d


def b(desc=None, **kw):
    d = {"type": "boolean"}
    if desc:
        d["description"] = desc
    d.update(kw)
    return d


def t(desc):
    return {"type": "string", "format": "date-time", "description": desc}


def arr(items, desc=None):
    d = {"type": "array", "items": items}
    if desc:
        d["description"] = desc
    return d


def obj(props, desc=None, required=None, nullable=False):
    d = {"type": "object"}
    if desc:
        d["description"] = desc
    d["properties"] = props
    if required:
        d["required"] = required
    if nullable:
        d["nullable"] = True
    return d


def smap(desc):
    return {"type": "object", "description": desc,
            "additionalProperties": {"type": "string"}}


def strs(desc):
    return arr({"type": "string"}, desc)


LABEL_SELECTOR = obj({
    "matchLabels": smap("Labels that must all be present with these values."),
    "matchExpressions": arr(obj({
        "key": s("Label key."),
        "operator": s("In, NotIn, Exists or DoesNotExist.",
                      enum=["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": strs("Values for In and NotIn; empty for Exists and DoesNotExist."),
    }, required=["key", "operator"]), "Label requirements, all must hold."),
}, "A Kubernetes label selector (metav1.LabelSelector); all parts must match.",
    nullable=True)

CONDITIONS = arr(obj({
    "type": s("Condition type, e.g. Claimed, Progressing, Ready."),
    "status": s("True, False or Unknown.", enum=["True", "False", "Unknown"]),
    "reason": s("One CamelCase word saying why."),
    "message": s("Human-readable detail."),
    "lastTransitionTime": t("When status last changed."),
    "observedGeneration": i("metadata.generation this condition was computed for."),
}, required=["type", "status"]), "Kubernetes-style conditions.")

CLAIM = obj({
    "holder": s("Server id (--server-id) of the server that owns this item."),
    "worker": s("Worker id <server-id>/<n> processing the item."),
    "attempt": i("1 for the first claim, +1 on every takeover.", minimum=1),
    "claimedAt": t("When the claim was written."),
}, "Who owns this item: written with the item's resourceVersion, so only one "
   "worker in the cluster can win a claim.")

HOOK_TARGETS = {
    "name": s("Name of this hook rule (hook failures and logs name it)."),
    "includedNamespaces": strs("Namespaces whose pods get these hooks ('*' globs); "
                               "empty: all."),
    "excludedNamespaces": strs("Namespaces whose pods do not."),
    "includedResources": strs("Resources the hooks apply to; hooks run on pods "
                              "only, so empty, '*' or pods."),
    "excludedResources": strs("Resources the hooks do not apply to."),
    "labelSelector": LABEL_SELECTOR,
}

BACKUP_EXEC_HOOK = obj({
    "container": s("Container to run in; default: the pod's first container."),
    "command": dict(strs("The command and its arguments (run as is, no shell "
                         "added); at least one."), minItems=1),
    "onError": s("Fail (the default): a failure fails the backup, naming the hook; "
                 "Continue: it is recorded as a warning.", enum=["Continue", "Fail"]),
    "timeout": s("How long the command may run (Go duration); default 30s."),
}, "A command run in a container of the pod through the API server (pods/exec), "
   "as `kubectl exec` does.", required=["command"])

BACKUP_HOOKS = obj({
    "resources": arr(obj(dict(HOOK_TARGETS, **{
        "pre": arr(obj({"exec": BACKUP_EXEC_HOOK}, required=["exec"]),
                   "Run before the pod's items are backed up, in order."),
        "post": arr(obj({"exec": BACKUP_EXEC_HOOK}, required=["exec"]),
                    "Run after the pod's items (and, for a pod that mounts "
                    "claims, its volumes) are backed up, in order; also when "
                    "the pod's backup failed."),
    }), required=["name"]), "Hook rules, applied to every backed-up pod they select. "
       "A pod with pre.hook.backup.velero.io/* (post.hook.backup.velero.io/*) "
       "annotations runs those instead of the rules' pre (post) hooks."),
}, "Velero backup hooks: commands run in pods around their backup (docs/hooks.md).")

RESTORE_HOOKS = obj({
    "resources": arr(obj(dict(HOOK_TARGETS, **{
        "postHooks": arr(obj({
            "init": obj({
                "initContainers": arr({"type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True,
                                       "description": "A container (name and image "
                                                      "required)."},
                                      "Added to the pod before its own init "
                                      "containers."),
                "timeout": s("Accepted, not enforced (the kubelet runs init "
                             "containers; as in Velero): warned."),
            }, "Init containers added to restored pods the rule selects."),
            "exec": obj({
                "container": s("Container to run in; default: the pod's first."),
                "command": dict(strs("The command and its arguments (no shell "
                                     "added); at least one."), minItems=1),
                "onError": s("Fail (the default): a failure is a restore error "
                             "(PartiallyFailed) and the pod's later hooks do not "
                             "run; Continue: a warning.", enum=["Continue", "Fail"]),
                "execTimeout": s("How long the command may run; default 30s."),
                "waitTimeout": s("How long to wait for the container to run (be "
                                 "ready, with waitForReady); unset: no limit."),
                "waitForReady": b("Wait for the container to be ready, not just "
                                  "running.", nullable=True),
            }, "A command run in the restored pod once its container runs.",
                required=["command"]),
        }), "Hooks for the restored pods the rule selects, in order."),
    }), required=["name"]), "Hook rules. A pod with init.hook.restore.velero.io/* "
       "(post.hook.restore.velero.io/*) annotations gets those instead of the rules' "
       "init (exec) hooks."),
}, "Velero restore hooks (docs/hooks.md).")

CHECKPOINT_RESTORE_HOOKS = obj({
    "attempt": i("Claim attempt that wrote this state."),
    "attempted": i("Hooks attempted so far, all attempts."),
    "failed": i("Hooks failed so far."),
    "pods": arr(obj({
        "pod": s("namespace/name (as restored)."),
        "next": i("Exec hooks of the pod run so far, in order."),
        "done": b("No hook of the pod is left to run."),
    }), "Restored pods with exec hooks."),
}, "Post-restore exec hooks run so far, so a resumed restore runs each once.")

HOOK_STATE = obj({
    "name": s("Hook rule name, or <from-annotation>."),
    "container": s("Container; unset: the pod's first."),
    "command": strs("Command."),
    "onError": s("Fail or Continue.", enum=["Continue", "Fail"]),
    "timeoutSeconds": i("Timeout; unset: 30 s."),
}, "A hook as decided when the pod was frozen.")

CHECKPOINT_HOOKS = obj({
    "attempt": i("Claim attempt that wrote this state."),
    "attempted": i("Hooks attempted so far, all attempts."),
    "failed": i("Hooks failed so far."),
    "pods": arr(obj({
        "pod": s("namespace/name."),
        "frozen": b("Its pre hooks may have run and its post hooks have not: "
                    "a resumed or taken-over backup runs them first."),
        "attempt": i("Attempt that froze it last."),
        "volumes": b("Its post hooks wait until its volumes are copied."),
        "pre": arr(HOOK_STATE, "Pre hooks, kept to freeze it again before the "
                               "volume step after a restart."),
        "post": arr(HOOK_STATE, "Post hooks to run."),
    }), "Pods frozen by a pre hook, or waiting for the volume step."),
}, "Backup hooks: which pods are frozen, so no restart leaves one frozen. "
   "Written (journal first) before a pre hook runs and after post hooks ran.")

HOOK_STATUS = obj({
    "hooksAttempted": i("Hooks run (or started)."),
    "hooksFailed": i("Hooks that failed (non-zero exit, timeout, missing "
                     "container...)."),
}, "Hook counters, as Velero's status.hookStatus.")

CHECKPOINT_BACKUP = obj({
    "uploadID": s("Multipart upload id of the tarball (S3), or the part "
                  "directory token (fs)."),
    "parts": arr(obj({
        "number": i("Part number, 1-based.", minimum=1),
        "etag": s("ETag the storage returned for this part."),
        "lastItem": s("Key (group/resource/namespace/name) of the last item "
                      "in this part."),
        "items": i("Items in this part."),
        "bytes": i("Compressed bytes of this part."),
        "sha256": s("SHA-256 (hex) of this part's compressed bytes, before "
                    "any encryption: `cairn backup verify` and restores check "
                    "each part against it."),
    }, required=["number"]), "Completed tarball parts, in order."),
    "itemsDone": i("Items in all completed parts."),
    "listContinue": s("Continue token of the list page holding the last item "
                      "of the last part: a resumed backup lists on from there "
                      "(expired: the resource is listed again from the start, "
                      "skipping up to lastItem)."),
    "hooks": CHECKPOINT_HOOKS,
    "results": obj({
        "errors": i("Errors recorded up to the last completed part."),
        "warnings": i("Warnings recorded up to the last completed part."),
        "errorMessages": strs("Their first 100 error messages."),
        "warningMessages": strs("Their first 100 warning messages."),
    }, "What was recorded up to the last completed part: a resumed backup "
       "starts its errors and warnings from here (a message recorded again "
       "by the resumed run is not counted twice)."),
}, "Enough to resume: every completed part and the last item it holds. "
   "Written after the part is stored and recorded in the server's journal.")

BACKUP_SPEC_PROPS = {
    "includedNamespaces": strs("Namespaces to include ('*' globs); empty or '*': all."),
    "excludedNamespaces": strs("Namespaces to exclude ('*' globs)."),
    "includedResources": strs("Resources to include (resource or resource.group); "
                              "empty or '*': all."),
    "excludedResources": strs("Resources to exclude."),
    "includeClusterResources": b(
        "Cluster-scoped resources: true all, false none, unset only those "
        "related to the included namespaces (all when every namespace is "
        "included).", nullable=True),
    "labelSelector": LABEL_SELECTOR,
    "orLabelSelectors": arr(LABEL_SELECTOR, "Items matching any of these "
                            "selectors (instead of labelSelector)."),
    "ttl": s("How long the backup is kept, Go duration (720h by default)."),
    "storageLocation": s("Name of the BackupStorageLocation; default: the one "
                         "marked default."),
    "volumeSnapshotLocations": strs("Not implemented (cairn's volume plugins decide "
                                    "where volume data goes): warned."),
    "snapshotVolumes": b("Snapshot volumes with plugins.", nullable=True),
    "defaultVolumesToFsBackup": b("Not implemented (volumes are copied by cairn's "
                                  "volume plugins): warned when true.", nullable=True),
    "defaultVolumesToRestic": b("Deprecated Velero name of defaultVolumesToFsBackup: "
                                "warned when true.", nullable=True),
    "orderedResources": smap("Per resource (plural, or plural.group): comma-"
                             "separated namespace/name (cluster-scoped: name) "
                             "items backed up first, in this order (their hooks "
                             "run in this order too); the resource's other items "
                             "follow in name order. A name not found is a warning."),
    "hooks": BACKUP_HOOKS,
    "metadata": obj({"labels": smap("In a Schedule's template: labels put on the "
                                    "Backups it creates (on a Backup: warned).")},
                    "Velero compatibility."),
    "includedClusterScopedResources": strs("Not implemented: refused "
                                           "(FailedValidation); use includedResources "
                                           "with includeClusterResources."),
    "excludedClusterScopedResources": strs("Not implemented: refused."),
    "includedNamespaceScopedResources": strs("Not implemented: refused; use "
                                             "includedResources."),
    "excludedNamespaceScopedResources": strs("Not implemented: refused; use "
                                             "excludedResources."),
    "resourcePolicy": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                       "description": "Velero resource policies: not implemented, "
                                      "refused (FailedValidation)."},
    "snapshotMoveData": b("CSI snapshot data movement: not implemented, refused "
                          "when true.", nullable=True),
    "datamover": s("Data mover for snapshotMoveData: not implemented, warned."),
    "csiSnapshotTimeout": s("How long the CSI snapshot plugin waits for each "
                            "VolumeSnapshot to become ready (default 10m), as "
                            "Velero's."),
    "itemOperationTimeout": s("Not implemented (no asynchronous item operations): "
                              "warned."),
    "uploaderConfig": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                       "description": "Velero's pod volume uploader settings: not "
                                      "implemented, warned."},
    "volumeGroupSnapshotLabelKey": s("Label key grouping PVCs into CSI volume group "
                                     "snapshots: not implemented (cairn takes no CSI "
                                     "snapshots), warned."),
    "backupType": s("Full or Incremental volume data: not implemented (cairn's "
                    "volume plugins decide how volume data is copied), warned.",
                    enum=["Full", "Incremental"]),
}

PROGRESS_BACKUP = obj({
    "totalItems": i("Items the backup will hold after its filters: counted before "
                    "they are listed where the API server gives a count, else as "
                    "they are listed; never decreases while the backup runs; at "
                    "the end, the items it holds (as Velero)."),
    "itemsBackedUp": i("Items written to the tarball so far (items, not tar entries: "
                       "each item has two)."),
    "bytesDone": i("Tarball bytes stored so far plus those of the part being "
                   "written; at the end, the tarball's size in storage."),
}, "Updated at most once a second while the backup runs; never goes back "
   "within an attempt.")

BACKUP_PHASES = ["New", "Queued", "ReadyToStart", "FailedValidation", "InProgress",
                 "WaitingForPluginOperations", "Finalizing", "Completed",
                 "PartiallyFailed", "Failed", "Deleting"]

BACKUP_STATUS = obj({
    "version": i("Backup format major version (1)."),
    "formatVersion": s("Tarball format version, 1.1.0."),
    "expiration": t("When the backup expires (startTimestamp + ttl)."),
    "phase": s("Lifecycle phase.", enum=BACKUP_PHASES),
    "validationErrors": strs("Why the spec was rejected (phase FailedValidation)."),
    "startTimestamp": t("When a server started the backup."),
    "completionTimestamp": t("When the backup ended (any final phase)."),
    "failureReason": s("Why the backup Failed."),
    "warnings": i("Warnings recorded (see the results file)."),
    "errors": i("Errors recorded (see the results file)."),
    "volumeSnapshotsAttempted": i("Volume snapshots attempted."),
    "volumeSnapshotsCompleted": i("Volume snapshots completed."),
    "progress": PROGRESS_BACKUP,
    "hookStatus": HOOK_STATUS,
    "claim": CLAIM,
    "checkpoint": CHECKPOINT_BACKUP,
    "conditions": CONDITIONS,
    "encryption": obj({
        "keyID": s("Key id of the location's key the backup was written with "
                   "(every stored object names its own key id too)."),
        "algorithm": s("AES-256-GCM."),
    }, "Client-side encryption of the backup's objects; absent when its "
       "location does not encrypt."),
    "verification": obj({
        "lastVerified": t("When the backup was last read back and checked."),
        "result": s("Passed or Failed.", enum=["Passed", "Failed"]),
        "message": s("What was checked, or the first problem found (naming "
                     "the part or file)."),
        "partsChecked": i("Tarball parts whose checksum was checked."),
        "itemsChecked": i("Tarball items checked against the resource list."),
        "verifiedBy": s("Who checked: a server id, or cli."),
    }, "The last check of the backup in storage (`cairn backup verify`, or "
       "the server's periodic verification)."),
})

BACKUP = dict(
    kind="Backup", plural="backups", singular="backup", short=["cbackup", "cbk"],
    desc="A backup of cluster objects into a Velero-format tarball in object storage.",
    spec=obj(BACKUP_SPEC_PROPS, "What to back up and where."),
    status=BACKUP_STATUS,
    columns=[
        ("Phase", "string", ".status.phase", "Lifecycle phase", 0),
        ("Items", "integer", ".status.progress.itemsBackedUp", "Items backed up", 0),
        ("Total", "integer", ".status.progress.totalItems", "Items expected", 0),
        ("Holder", "string", ".status.claim.holder", "Server that owns the backup", 0),
        ("Location", "string", ".spec.storageLocation", "Storage location", 0),
        ("Age", "date", ".metadata.creationTimestamp", "", 0),
        ("Errors", "integer", ".status.errors", "Errors", 1),
        ("Expires", "date", ".status.expiration", "Expiration", 1),
    ])

RESTORE = dict(
    kind="Restore", plural="restores", singular="restore", short=["crestore", "crs"],
    desc="A restore of the objects of a Backup into the cluster.",
    spec=obj({
        "backupName": s("Backup to restore from (required)."),
        "scheduleName": s("The Schedule whose latest Completed backup "
                          "`cairn restore create --from-schedule` chose as "
                          "backupName (a record; the restore reads backupName). "
                          "Without backupName it is refused (FailedValidation): "
                          "the server does not pick a schedule's latest backup."),
        "includedNamespaces": strs("Namespaces to restore ('*' globs); empty: all."),
        "excludedNamespaces": strs("Namespaces not to restore."),
        "includedResources": strs("Resources to restore; empty: all."),
        "excludedResources": strs("Resources not to restore."),
        "namespaceMapping": smap("Restore objects of namespace KEY into VALUE."),
        "labelSelector": LABEL_SELECTOR,
        "orLabelSelectors": arr(LABEL_SELECTOR, "Items matching any of these."),
        "restorePVs": b("Restore persistent volumes from snapshots.", nullable=True),
        "restoreStatus": obj({
            "includedResources": strs("Resources whose status is restored."),
            "excludedResources": strs("Resources whose status is not restored."),
        }, "Which resources get their status restored.", nullable=True),
        "preserveNodePorts": b("Keep Service nodePorts.", nullable=True),
        "includeClusterResources": b("As in Backup.", nullable=True),
        "existingResourcePolicy": s("What to do with existing objects that differ.",
                                    enum=["", "none", "update"]),
        "hooks": RESTORE_HOOKS,
        "itemOperationTimeout": s("Not implemented (no asynchronous item "
                                  "operations): warned."),
        "resourceModifier": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "description": "Velero resource modifiers (JSON patches "
                                            "applied before restoring): not "
                                            "implemented, refused (FailedValidation)."},
        "resourcePolicy": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                           "description": "Velero resource filter policies: not "
                                          "implemented, refused (FailedValidation)."},
        "uploaderConfig": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                           "description": "Velero's pod volume restore settings "
                                          "(writeSparseFiles, parallelFilesDownload): "
                                          "not implemented, warned."},
    }, "What to restore."),
    status=obj({
        "phase": s("Lifecycle phase.", enum=["New", "FailedValidation", "InProgress",
                                             "WaitingForPluginOperations", "Finalizing",
                                             "Completed", "PartiallyFailed", "Failed"]),
        "validationErrors": strs("Why the spec was rejected."),
        "startTimestamp": t("When a server started the restore."),
        "completionTimestamp": t("When the restore ended."),
        "failureReason": s("Why the restore Failed."),
        "warnings": i("Warnings recorded."),
        "errors": i("Errors recorded."),
        "progress": obj({
            "totalItems": i("Items to restore."),
            "itemsRestored": i("Items restored so far."),
            "bytesDone": i("Compressed tarball bytes read so far."),
        }, "Updated at most once a second."),
        "hookStatus": HOOK_STATUS,
        "claim": CLAIM,
        "checkpoint": obj({
            "itemsDone": i("Items restored (or skipped) before the checkpoint."),
            "lastItem": s("Key of the last item handled."),
            "tier": i("Priority tier in progress."),
            "hooks": CHECKPOINT_RESTORE_HOOKS,
        }, "Enough to resume a restore."),
        "conditions": CONDITIONS,
    }),
    columns=[
        ("Backup", "string", ".spec.backupName", "Backup restored", 0),
        ("Phase", "string", ".status.phase", "Lifecycle phase", 0),
        ("Items", "integer", ".status.progress.itemsRestored", "Items restored", 0),
        ("Total", "integer", ".status.progress.totalItems", "Items to restore", 0),
        ("Holder", "string", ".status.claim.holder", "Server that owns the restore", 0),
        ("Age", "date", ".metadata.creationTimestamp", "", 0),
    ])

SCHEDULE = dict(
    kind="Schedule", plural="schedules", singular="schedule", short=["cschedule"],
    desc="Backups created on a cron schedule.",
    spec=obj({
        "template": obj(BACKUP_SPEC_PROPS, "The spec of each Backup created."),
        "schedule": s("5-field cron expression (minute hour day month weekday)."),
        "useOwnerReferencesInBackup": b("Make the Schedule own its Backups.",
                                        nullable=True),
        "paused": b("Create no backups while true."),
        "skipImmediately": b("Do not back up at once when (re)enabled.",
                             nullable=True),
    }, "When and what to back up.", required=["template", "schedule"]),
    status=obj({
        "phase": s("New, Enabled or FailedValidation.",
                   enum=["New", "Enabled", "FailedValidation"]),
        "lastBackup": t("When the last Backup was created."),
        "lastSkipped": t("When a run was last skipped."),
        "validationErrors": strs("Why the spec was rejected."),
        "conditions": CONDITIONS,
    }),
    columns=[
        ("Status", "string", ".status.phase", "Phase", 0),
        ("Schedule", "string", ".spec.schedule", "Cron schedule", 0),
        ("LastBackup", "date", ".status.lastBackup", "Last backup created", 0),
        ("Paused", "boolean", ".spec.paused", "Paused", 0),
        ("Age", "date", ".metadata.creationTimestamp", "", 0),
    ])

BSL = dict(
    kind="BackupStorageLocation", plural="backupstoragelocations",
    singular="backupstoragelocation", short=["cbsl"],
    desc="Where backups are stored: a local directory (fs) or an S3 bucket.",
    spec=obj({
        "provider": s("fs (a local directory) or s3 (aws is an alias)."),
        "config": smap("Provider settings: path, readOnlyWait (fs); endpoint, region, "
                       "s3ForcePathStyle, insecureSkipTLSVerify, caCertFile, "
                       "serverSideEncryption (AES256 or aws:kms), kmsKeyId, "
                       "customerKeyEncryptionFile (SSE-C) (s3)."),
        "credential": obj({
            "name": s("Secret name (in the server's namespace)."),
            "key": s("Key in the Secret holding an AWS-format credentials file."),
        }, "Credentials for the provider.", nullable=True),
        "objectStorage": obj({
            "bucket": s("Bucket (s3) or sub-directory (fs)."),
            "prefix": s("Key prefix inside the bucket."),
            "caCert": s("PEM CA bundle, base64, for the endpoint.", format="byte"),
        }, "Bucket and prefix.", required=["bucket"]),
        "default": b("The location used when a Backup names none."),
        "accessMode": s("ReadWrite or ReadOnly.", enum=["ReadWrite", "ReadOnly"]),
        "backupSyncPeriod": s("How often backups in storage are synced into "
                              "the cluster (Go duration)."),
        "validationFrequency": s("How often the location is checked (Go duration)."),
        "encryption": obj({
            "keyID": s("Id of the key new objects are encrypted with: a data "
                       "key of the Secret (1-32 of A-Z a-z 0-9 . _ -).",
                       pattern="^[A-Za-z0-9._-]{1,32}$"),
            "secretRef": obj({
                "name": s("Secret (in the server's namespace) whose data "
                          "holds the keys, one per key id: 32 random bytes "
                          "each, raw, hex or base64."),
            }, "The Secret holding the keys.", required=["name"]),
            "allowUnencryptedReads": b("Read objects that are not encrypted "
                                       "(backups written before encryption was "
                                       "turned on); by default they are refused."),
        }, "Client-side encryption (AES-256-GCM) of every object cairn writes "
           "here; old keys stay in the Secret so older backups stay readable.",
           required=["keyID", "secretRef"], nullable=True),
    }, "The storage location.", required=["provider", "objectStorage"]),
    status=obj({
        "phase": s("Available or Unavailable.", enum=["Available", "Unavailable"]),
        "lastSyncedTime": t("Last sync of backups from storage."),
        "lastValidationTime": t("Last check of the location."),
        "message": s("Why the location is Unavailable."),
        "accessMode": s("Deprecated Velero field.", enum=["ReadWrite", "ReadOnly"]),
    }),
    columns=[
        ("Phase", "string", ".status.phase", "Available or Unavailable", 0),
        ("Provider", "string", ".spec.provider", "Provider", 0),
        ("Bucket", "string", ".spec.objectStorage.bucket", "Bucket", 0),
        ("Last Validated", "date", ".status.lastValidationTime", "", 0),
        ("Default", "boolean", ".spec.default", "Default location", 0),
        ("Age", "date", ".metadata.creationTimestamp", "", 0),
    ])

VOL_PROGRESS = obj({
    "totalBytes": i("Bytes to move."),
    "bytesDone": i("Bytes moved so far (the built-in mover: file bytes scanned, "
                   "read or known unchanged since the copy it builds on)."),
    "bytesUploaded": i("Bytes stored so far (the built-in mover: its index and the "
                       "chunks no earlier copy of the volume holds, compressed)."),
}, "Byte progress reported by the plugin.")

VPB = dict(
    kind="VolumePluginBackup", plural="volumepluginbackups",
    singular="volumepluginbackup", short=["vpb"],
    desc="One volume snapshot taken by a volume plugin for a Backup, with its progress "
         "(labels cairn.io/backup-name, cairn.io/volume-name).",
    spec=obj({
        "volume": s("Volume (PersistentVolume name)."),
        "backup": s("Backup name."),
        "provider": s("Plugin that takes the snapshot (cairn.io/hostpath: the "
                      "built-in mover)."),
        "volumeType": s("Volume type of the PersistentVolume (hostPath, local, "
                        "nfs...)."),
        "volumePath": s("Path of the volume's data on its node, when it has one."),
        "node": s("Node whose node-agent runs the operation; unset: the server."),
        "backupUID": s("metadata.uid of the Backup, so a re-created Backup of "
                       "the same name never adopts this operation."),
    }, "The volume operation."),
    status=obj({
        "phase": s("Lifecycle phase.", enum=["New", "InProgress", "Completed",
                                             "PartiallyFailed", "Failed"]),
        "snapshotID": s("Plugin's snapshot id."),
        "message": s("Detail from the plugin."),
        "startTimestamp": t("Start."),
        "completionTimestamp": t("End."),
        "backupProperties": smap("Plugin-specific facts (e.g. parent snapshot)."),
        "progress": VOL_PROGRESS,
        "claim": CLAIM,
        "checkpoint": obj({
            "uploadID": s("Multipart upload id of the volume's tarball."),
            "parts": i("Parts stored."),
            "lastFile": s("Last file (relative path) in the stored parts."),
            "bytesDone": i("Bytes of file data in the stored parts."),
            "filesDone": i("Files in the stored parts."),
            "bytesUploaded": i("Bytes stored for them (index parts and chunk "
                               "packs)."),
        }, "Enough to resume a built-in copy after its last stored part "
           "(written after the part is stored and journalled)."),
    }),
    columns=[
        ("Backup", "string", ".spec.backup", "Backup", 0),
        ("Volume", "string", ".spec.volume", "Volume", 0),
        ("Phase", "string", ".status.phase", "Phase", 0),
        ("Done", "integer", ".status.progress.bytesDone", "Bytes done", 0),
        ("Total", "integer", ".status.progress.totalBytes", "Bytes to move", 0),
        ("Uploaded", "integer", ".status.progress.bytesUploaded", "Bytes stored", 1),
        ("Age", "date", ".metadata.creationTimestamp", "", 0),
    ])

VPR = dict(
    kind="VolumePluginRestore", plural="volumepluginrestores",
    singular="volumepluginrestore", short=["vpr"],
    desc="One volume restored by a volume plugin for a Restore, with its progress.",
    spec=obj({
        "snapshotID": s("Snapshot to restore from."),
        "backupName": s("Backup the snapshot belongs to."),
        "restoreName": s("Restore this operation is part of."),
        "provider": s("Plugin that restores the volume."),
        "volumeType": s("Volume type."),
        "volumeAZ": s("Availability zone."),
        "volume": s("Volume (PersistentVolume name) being restored."),
        "targetPath": s("Directory on the node the data is restored into."),
        "node": s("Node whose node-agent runs the operation; unset: the server."),
        "expectBytes": i("Bytes the backup's copy holds (totalBytes of its "
                         "VolumePluginBackup)."),
        "backupProperties": smap("backupProperties of the VolumePluginBackup, "
                                 "handed to the plugin."),
        "persistentVolume": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "description": "The PersistentVolume from the backup "
                                            "(metadata and spec), for the plugin."},
        "persistentVolumeClaim": {"type": "object",
                                  "x-kubernetes-preserve-unknown-fields": True,
                                  "description": "The claim being restored (namespace "
                                                 "mapped) when the plugin restores "
                                                 "through it (a snapshot as its "
                                                 "dataSource)."},
    }, "The volume operation."),
    status=obj({
        "phase": s("Lifecycle phase.", enum=["New", "InProgress", "Completed",
                                             "PartiallyFailed", "Failed"]),
        "volumeID": s("Id of the restored volume."),
        "dataSource": obj({
            "apiGroup": s("API group (snapshot.storage.k8s.io)."),
            "kind": s("Kind (VolumeSnapshot)."),
            "name": s("Name, in the claim's namespace."),
        }, "What the restored claim is provisioned from (a plugin that restores "
           "through the claim)."),
        "restoreSize": s("Smallest size of a claim provisioned from that dataSource."),
        "message": s("Detail from the plugin."),
        "startTimestamp": t("Start."),
        "completionTimestamp": t("End."),
        "restoreProperties": smap("Plugin-specific facts."),
        "progress": VOL_PROGRESS,
        "claim": CLAIM,
    }),
    columns=[
        ("Backup", "string", ".spec.backupName", "Backup", 0),
        ("Snapshot", "string", ".spec.snapshotID", "Snapshot", 0),
        ("Phase", "string", ".status.phase", "Phase", 0),
        ("Done", "integer", ".status.progress.bytesDone", "Bytes done", 0),
        ("Total", "integer", ".status.progress.totalBytes", "Bytes to move", 0),
        ("Age", "date", ".metadata.creationTimestamp", "", 0),
    ])


def crd(d):
    status = dict(d["status"])
    status.setdefault("description", "Observed state, written only by cairn "
                      "(through the status subresource).")
    schema = obj({
        "apiVersion": s("APIVersion of this object."),
        "kind": s("Kind of this object."),
        "metadata": {"type": "object"},
        "spec": d["spec"],
        "status": status,
    }, d["desc"])
    cols = []
    for name, typ, path, desc, prio in d["columns"]:
        c = {"name": name, "type": typ, "jsonPath": path}
        if desc:
            c["description"] = desc
        if prio:
            c["priority"] = prio
        cols.append(c)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (d["plural"], GROUP),
                     "labels": {"app.kubernetes.io/name": "cairn"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": d["kind"], "listKind": d["kind"] + "List",
                      "plural": d["plural"], "singular": d["singular"],
                      "shortNames": d["short"], "categories": ["cairn"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": cols,
            }],
        },
    }


# ---- a tiny YAML emitter (block style, quoted strings where needed) --------
def scalar(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    sv = str(v)
    plain = (sv and sv.strip() == sv and not any(c in sv for c in ":#{}[],&*!|>'\"%@`")
             and sv[0] not in "-?" and sv.lower() not in ("true", "false", "yes", "no",
                                                          "on", "off", "null", "~")
             and not sv.replace(".", "").isdigit())
    if plain:
        return sv
    return '"' + sv.replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit(v, ind, out):
    pad = "  " * ind
    if isinstance(v, dict):
        if not v:
            return
        for k, x in v.items():
            if isinstance(x, dict) and x:
                out.append("%s%s:" % (pad, scalar(k)))
                emit(x, ind + 1, out)
            elif isinstance(x, list) and x:
                out.append("%s%s:" % (pad, scalar(k)))
                emit(x, ind, out)
            elif isinstance(x, (dict, list)):
                out.append("%s%s: %s" % (pad, scalar(k), "{}" if isinstance(x, dict) else "[]"))
            else:
                out.append("%s%s: %s" % (pad, scalar(k), scalar(x)))
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, dict) and x:
                sub = []
                emit(x, ind + 1, sub)
                first = sub[0].lstrip()
                out.append("%s- %s" % (pad, first))
                out.extend(sub[1:])
            else:
                out.append("%s- %s" % (pad, scalar(x)))


# ---- docs/objects.md: every field, from the same tables ----------------------
DOC_INTRO = """# cairn.io/v1 objects

Generated by `python3 schema/gen_crds.py` from the same tables as
`schema/crds/*.yaml`; do not edit by hand. Install the definitions with
`kubectl apply -f schema/crds/`.

Field names are Velero's (velero.io/v1) wherever the concept is the same, so
manifests move between the tools with the apiVersion changed. cairn adds, on
Backup and Restore, `status.claim` (who owns the item: written with the
object's resourceVersion, so exactly one worker wins), `status.checkpoint`
(enough to resume), `status.progress` (updated at most once a second) and
`status.conditions`. See docs/protocol.md for how claims and checkpoints are
used and docs/backup-format.md for what a backup writes to storage.
"""


def field_rows(schema, path, out):
    props = schema.get("properties", {})
    for name, sub in props.items():
        p = "%s.%s" % (path, name) if path else name
        typ = sub.get("type", "")
        if typ == "array":
            it = sub.get("items", {})
            typ = "[]" + (it.get("type", "") if it.get("type") != "object" or "properties" not in it
                          else "object")
            if it.get("type") == "object" and "properties" in it:
                out.append((p, typ, sub.get("description", it.get("description", ""))))
                field_rows(it, p + "[]", out)
                continue
        elif typ == "object" and "additionalProperties" in sub:
            typ = "map[string]string"
        elif typ == "string" and sub.get("format") == "date-time":
            typ = "time (RFC 3339)"
        elif sub.get("x-kubernetes-preserve-unknown-fields"):
            typ = "object (free-form)"
        desc = sub.get("description", "")
        if "enum" in sub:
            desc += " One of: %s." % ", ".join("`%s`" % e for e in sub["enum"] if e)
        if sub.get("nullable"):
            desc += " May be null/unset."
        out.append((p, typ, desc))
        if sub.get("type") == "object" and "properties" in sub:
            field_rows(sub, p, out)


def docs():
    lines = [DOC_INTRO]
    for d in (BACKUP, RESTORE, SCHEDULE, BSL, VPB, VPR):
        c = crd(d)
        v = c["spec"]["versions"][0]
        lines.append("## %s (`%s`, short names %s)\n" % (
            d["kind"], c["metadata"]["name"], ", ".join("`%s`" % x for x in d["short"])))
        lines.append(d["desc"] + "\n")
        lines.append("Printer columns (`kubectl get %s`): %s.\n" % (
            c["metadata"]["name"], ", ".join(
                "%s (`%s`%s)" % (col["name"], col["jsonPath"],
                                 ", wide" if col.get("priority") else "")
                for col in v["additionalPrinterColumns"])))
        lines.append("| field | type | meaning |")
        lines.append("|---|---|---|")
        rows = []
        root = v["schema"]["openAPIV3Schema"]
        for top in ("spec", "status"):
            rows.append((top, "object", root["properties"][top].get("description", "")))
            field_rows(root["properties"][top], top, rows)
        for p, typ, desc in rows:
            lines.append("| `%s` | %s | %s |" % (p, typ, desc.replace("|", "\\|")))
        lines.append("")
    path = os.path.join(HERE, "..", "docs", "objects.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines))
    os.replace(path + ".tmp", path)
    if "-q" not in sys.argv:
        print(os.path.normpath(path))


def main():
    outdir = os.path.join(HERE, "crds")
    os.makedirs(outdir, exist_ok=True)
    for d in (BACKUP, RESTORE, SCHEDULE, BSL, VPB, VPR):
        lines = ["# generated by schema/gen_crds.py; do not edit by hand", "---"]
        emit(crd(d), 0, lines)
        path = os.path.join(outdir, "cairn.io_%s.yaml" % d["plural"])
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(path + ".tmp", path)
        if "-q" not in sys.argv:
            print(path)
    docs()


if __name__ == "__main__":
    main()

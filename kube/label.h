/*
 * label.h: names used as label values.
 *
 * A label value is at most 63 characters (the real server refuses longer
 * ones with 422). Object names may be 253, so a Backup called
 * "<60-character schedule>-20240101000000" cannot be written as a label
 * value as it is. kube_label_value() shortens it exactly as Velero's
 * GetValidName (pkg/label/label.go) does, so the values cairn writes and
 * the selectors it builds agree with each other and with Velero's:
 * names of at most 63 characters unchanged; longer ones cut to their
 * first 57 characters followed by the first 6 hex digits of the SHA-256
 * of the whole name.
 *
 * Every place that writes a name as a label value (backup, restore,
 * schedule, location, volume and node names) and every selector that
 * matches one goes through it.
 */
#ifndef CAIRN_KUBE_LABEL_H
#define CAIRN_KUBE_LABEL_H

#define KUBE_LABEL_VALUE_MAX 63

/*
 * name as a label value (Velero's GetValidName): at most
 * KUBE_LABEL_VALUE_MAX characters. Owned (free()).
 */
char *kube_label_value(const char *name);

/* Does label value v stand for name (v == kube_label_value(name))? */
int kube_label_value_is(const char *v, const char *name);

#endif

/*
 * cmd_decrypt.c: `cairn decrypt --key-file K IN OUT`, and the keyring
 * every offline command builds from --key-file.
 *
 * decrypt reads an object as cairn stored it in an encrypted location (a
 * tarball downloaded with `aws s3 cp`, a file from an fs location, a
 * metadata .gz) and writes the plaintext, streaming, one 64 KiB chunk at a
 * time (storage/crypt.h). Only authenticated bytes are written, and OUT
 * appears only when the whole input decrypted: it is written to a
 * temporary file beside it and renamed at the end, so a changed byte
 * leaves no OUT and an error naming the part and the byte range. No
 * cluster is needed; the format is in docs/backup-format.md.
 */
#include "config.h"
#include "cmd/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/util.h"
#include "storage/crypt.h"

#define KEY_FILE_MAX 4096	/* a key file: 32 bytes, or text of them */
#define DEC_BUF (256u << 10)

/* The content of a key file, at most KEY_FILE_MAX bytes. */
static int
read_key_file(const char *path, unsigned char key[CRYPT_KEY_LEN],
    struct cairn_err *err)
{
	unsigned char data[KEY_FILE_MAX + 1];
	char *what;
	ssize_t n;
	size_t got = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cairn_err_errno(err, CAIRN_EINVAL, errno, "key file %s",
		    path);
	while (got < sizeof data) {
		n = read(fd, data + got, sizeof data - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got > KEY_FILE_MAX) {
		OPENSSL_cleanse(data, sizeof data);
		return cairn_err_set(err, CAIRN_EINVAL, "key file %s is too large "
		    "to be a key", path);
	}
	what = xasprintf("key file %s", path);
	rc = crypt_key_parse(data, got, what, key, err);
	free(what);
	OPENSSL_cleanse(data, sizeof data);
	return rc;
}

int
cli_keyring(const struct flagset *fs, struct crypt_keyring **out,
    struct cairn_err *err)
{
	char **files = flag_list(fs, F_KEY_FILE), *id, *eq;
	struct crypt_keyring *kr;
	unsigned char key[CRYPT_KEY_LEN];
	const char *path;
	int rc = 0;

	*out = NULL;
	if (files[0] == NULL)
		return 0;
	kr = crypt_keyring_new();
	for (size_t i = 0; rc == 0 && files[i] != NULL; i++) {
		eq = strchr(files[i], '=');
		id = eq ? xstrndup(files[i], (size_t)(eq - files[i])) : NULL;
		path = eq ? eq + 1 : files[i];
		rc = read_key_file(path, key, err);
		if (rc == 0)
			rc = crypt_keyring_add(kr, id, key, err);
		/* the first named key is the one to write with */
		if (rc == 0 && id != NULL && crypt_keyring_current(kr) == NULL)
			rc = crypt_keyring_set_current(kr, id, err);
		OPENSSL_cleanse(key, sizeof key);
		free(id);
	}
	if (rc < 0) {
		crypt_keyring_free(kr);
		return cairn_err_prefix(err, "--key-file");
	}
	*out = kr;
	return 1;
}

static int
write_all(void *arg, const void *p, size_t n)
{
	return util_write_all(*(int *)arg, p, n);
}

int
cmd_decrypt(const struct cli_command *cmd, struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;
	struct crypt_keyring *kr = NULL;
	struct crypt_dec *d = NULL;
	const char *in, *out;
	char *tmp = NULL, *buf = NULL;
	int ifd = -1, ofd = -1, rc, wr_failed = 0;
	ssize_t n;

	if (fs->nargs != 2)
		return cli_usage_error(cmd, "give the input and the output file "
		    "(\"-\" for stdin / stdout)");
	rc = cli_keyring(fs, &kr, &err);
	if (rc < 0)
		return cli_fail("%s", err.msg);
	if (rc == 0)
		return cli_usage_error(cmd, "--key-file is required");
	in = fs->args[0];
	out = fs->args[1];
	ifd = strcmp(in, "-") == 0 ? 0 : open(in, O_RDONLY | O_CLOEXEC);
	if (ifd < 0) {
		rc = cli_fail("cannot open %s: %s", in, strerror(errno));
		goto out;
	}
	if (strcmp(out, "-") == 0) {
		ofd = 1;
	} else {
		tmp = xasprintf("%s.cairn-partial", out);
		ofd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (ofd < 0) {
			rc = cli_fail("cannot create %s: %s", tmp, strerror(errno));
			goto out;
		}
	}
	d = crypt_dec_new(kr, strcmp(in, "-") == 0 ? "stdin" : in, 0,
	    write_all, &ofd);
	buf = xmalloc(DEC_BUF);
	rc = 0;
	for (;;) {
		n = read(ifd, buf, DEC_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = cli_fail("reading %s: %s", in, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if (crypt_dec_push(d, buf, (size_t)n, &err) < 0) {
			wr_failed = err.code == CAIRN_ECANCELED;
			break;
		}
	}
	if (err.code == 0)
		crypt_dec_finish(d, &err);
	if (err.code < 0) {
		rc = wr_failed ? cli_fail("writing %s: %s", out, strerror(errno)) :
		    cli_fail("%s", err.msg);
		goto out;
	}
	if (ofd != 1 && (fsync(ofd) < 0 || close(ofd) < 0)) {
		ofd = -1;
		rc = cli_fail("writing %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (ofd != 1) {
		ofd = -1;
		if (rename(tmp, out) < 0) {
			rc = cli_fail("renaming %s to %s: %s", tmp, out,
			    strerror(errno));
			goto out;
		}
		FREE_NULL(tmp);
	}
	rc = CLI_EXIT_OK;
out:
	if (ifd > 0)
		close(ifd);
	if (ofd > 1)
		close(ofd);
	if (tmp != NULL)
		unlink(tmp);
	free(tmp);
	free(buf);
	crypt_dec_free(d);
	crypt_keyring_free(kr);
	return rc;
}

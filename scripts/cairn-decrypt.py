#!/usr/bin/env python3
"""cairn-decrypt.py: decrypt an object cairn stored encrypted, without cairn.

    python3 cairn-decrypt.py KEYFILE IN OUT      (IN/OUT "-": stdin/stdout)

An independent reader of the format in docs/backup-format.md
("Encryption"): it needs Python 3 and the `cryptography` package (Debian:
python3-cryptography). KEYFILE holds the 32-byte key: raw, 64 hex digits or
base64. Every chunk is authenticated before its plaintext is written; any
changed, missing or extra byte stops it with an error and exit status 1.
"""
import base64
import binascii
import struct
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"cairnenc"
CHUNK = 65536


def read_key(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) == 32:
        return data
    text = data.strip()
    if len(text) == 64:
        return binascii.unhexlify(text)
    key = base64.b64decode(text, validate=True)
    if len(key) != 32:
        raise SystemExit("%s: not a 32-byte key" % path)
    return key


def read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise SystemExit("the data ends inside a segment (it was cut short)")
    return b


def decrypt(key, fin, fout):
    segments = 0
    while True:
        header = fin.read(64)
        if not header:
            if segments == 0:
                raise SystemExit("empty input")
            return segments
        if len(header) < 64 or header[:8] != MAGIC:
            raise SystemExit("not a cairn encryption header at segment %d" % segments)
        version, alg, chunk_log2, idlen = header[8], header[9], header[10], header[11]
        if (version, alg, chunk_log2) != (1, 1, 16):
            raise SystemExit("unknown format %d/%d/%d" % (version, alg, chunk_log2))
        part = struct.unpack(">I", header[12:16])[0]
        salt, key_id = header[16:32], header[32:32 + idlen].decode()
        seg_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt,
                       info=b"cairn segment key v1").derive(key)
        aead = AESGCM(seg_key)
        i = 0
        while True:
            word = read_exact(fin, 4)
            w = struct.unpack(">I", word)[0]
            final, length = bool(w & 0x80000000), w & 0x7FFFFFFF
            if length > CHUNK or (not final and length != CHUNK):
                raise SystemExit("impossible chunk length in part %d" % part)
            sealed = read_exact(fin, length + 16)
            nonce = b"\0\0\0\0" + struct.pack(">Q", i)
            try:
                plain = aead.decrypt(nonce, sealed, header + word)
            except Exception:
                raise SystemExit("part %d chunk %d does not authenticate (changed data, "
                                 "or not key %s)" % (part, i, key_id))
            fout.write(plain)
            i += 1
            if final:
                break
        segments += 1


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    key = read_key(sys.argv[1])
    fin = sys.stdin.buffer if sys.argv[2] == "-" else open(sys.argv[2], "rb")
    fout = sys.stdout.buffer if sys.argv[3] == "-" else open(sys.argv[3], "wb")
    decrypt(key, fin, fout)
    fout.flush()


if __name__ == "__main__":
    main()

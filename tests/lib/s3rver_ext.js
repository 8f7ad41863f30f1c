// s3rver_ext.js: starts s3rver (npm, pinned in package-lock.json) for the
// tests, plus the two multipart calls s3rver 3.7.1 does not implement:
// ListParts (GET ?uploadId) and AbortMultipartUpload (DELETE ?uploadId).
// They read and remove s3rver's own upload directory (parts stored as
// <n> and <n>.md5 by its FilesystemStore.putPart) and answer in S3's XML
// shape, so cairn's resume-from-list-parts path can be tested. Uploads
// and completes (PUT / POST ?uploadId) of an unknown or finished upload
// get S3's 404 NoSuchUpload instead of s3rver's 500, so a retried
// CompleteMultipartUpload meets what it meets on AWS. Everything else,
// including SigV4 checking for the S3RVER/S3RVER credentials, is
// s3rver's.
//
// usage: node s3rver_ext.js ROOT DATA-DIR READY-FILE [BUCKET...]
'use strict';
const fs = require('fs');
const path = require('path');

const [root, dataDir, readyFile, ...buckets] = process.argv.slice(2);
const S3rver = require(path.join(root, 'node_modules', 's3rver'));
const S3Error = require(path.join(root, 'node_modules', 's3rver', 'lib', 'models', 'error'));

// TLS when S3RVER_KEY and S3RVER_CERT name PEM files.
const tls = process.env.S3RVER_KEY && process.env.S3RVER_CERT
  ? { key: fs.readFileSync(process.env.S3RVER_KEY), cert: fs.readFileSync(process.env.S3RVER_CERT) }
  : {};

const server = new S3rver({
  ...tls,
  directory: dataDir,
  // S3RVER_SERVICE_ENDPOINT=localhost serves virtual-hosted buckets at
  // <bucket>.s3.localhost (libcurl resolves *.localhost to loopback).
  serviceEndpoint: process.env.S3RVER_SERVICE_ENDPOINT || 'amazonaws.com',
  address: '127.0.0.1',
  port: 0,
  silent: process.env.S3RVER_VERBOSE ? false : true,
  configureBuckets: buckets.map(name => ({ name, configs: [] })),
});

async function multipartExtras(ctx, next) {
  const m = /^\/([^/]+)\/(.+)$/.exec(ctx.path);
  if (!m || !('uploadId' in ctx.query) || !['GET', 'DELETE', 'PUT', 'POST'].includes(ctx.method)) {
    return next();
  }
  const bucket = m[1];
  const key = decodeURIComponent(m[2]);
  const uploadId = String(ctx.query.uploadId);
  const dir = path.join(server.store.getResourcePath(bucket, undefined, 'uploads'), uploadId);
  let storedKey = null;
  try {
    storedKey = fs.readFileSync(path.join(dir, 'key'), 'utf8');
  } catch (e) {
    storedKey = null;
  }
  if (!/^[0-9a-f]+$/.test(uploadId) || storedKey !== key) {
    throw new S3Error('NoSuchUpload', 'The specified upload does not exist.', { UploadId: uploadId });
  }
  if (ctx.method === 'PUT' || ctx.method === 'POST') {
    return next();
  }
  if (ctx.method === 'DELETE') {
    fs.rmSync(dir, { recursive: true, force: true });
    ctx.status = 204;
    return undefined;
  }
  const parts = fs.readdirSync(dir)
    .filter(n => /^[0-9]+$/.test(n) && fs.existsSync(path.join(dir, n + '.md5')))
    .map(Number)
    .sort((a, b) => a - b)
    .map(n => ({
      PartNumber: n,
      ETag: JSON.stringify(fs.readFileSync(path.join(dir, n + '.md5'), 'utf8')),
      Size: fs.statSync(path.join(dir, String(n))).size,
    }));
  ctx.body = {
    ListPartsResult: {
      '@': { xmlns: 'http://s3.amazonaws.com/doc/2006-03-01/' },
      Bucket: bucket,
      Key: key,
      UploadId: uploadId,
      MaxParts: 10000,
      IsTruncated: false,
      Part: parts,
    },
  };
  return undefined;
}

// After the logger, the XML encoder and the virtual-host rewrite (which
// puts the bucket into ctx.path), before s3rver's routes.
server.middleware.splice(server.middleware.length - 1, 0, multipartExtras);

server.run().then(addr => {
  fs.writeFileSync(readyFile + '.tmp', String(addr.port));
  fs.renameSync(readyFile + '.tmp', readyFile);
}, err => {
  console.error('s3rver failed to start:', err);
  process.exit(1);
});

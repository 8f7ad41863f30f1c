# Dockerfile: the image `cairn install` runs (default name cairn:<version>).
#
#   docker build -t cairn:0.1.0 .
#
# Two stages on Debian 12 (bookworm), the distribution cairn is developed
# on: the first builds with the same autotools build as everywhere else
# (./configure && make), the second holds only the binary and the shared
# libraries it links (the -dev packages' runtime halves) plus CA
# certificates for HTTPS to the API server and S3. The server runs as an
# unprivileged user; `cairn install` switches to root only for the fs
# provider, whose hostPath directory the kubelet creates root-owned.
# Nothing is downloaded at run time.

FROM debian:12-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential autoconf automake pkg-config \
      libsqlite3-dev libcurl4-openssl-dev libcjson-dev zlib1g-dev \
      libarchive-dev libmicrohttpd-dev libyaml-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Generated autotools files may be stale or absent in a checkout: remake them.
RUN autoreconf -fi \
 && mkdir /build && cd /build \
 && /src/configure --prefix=/usr \
 && make -j"$(nproc)" cairn \
 && strip cairn \
 && ./cairn version

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libsqlite3-0 libcurl4 libcjson1 zlib1g libarchive13 \
      libmicrohttpd12 libyaml-0-2 libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/cairn /usr/bin/cairn
# The journal and the fs provider's directory (volumes in the StatefulSet).
RUN mkdir -p /var/lib/cairn/journal /var/lib/cairn/backups \
 && chown -R 65532:65532 /var/lib/cairn
# The journal where `cairn install` puts it (its StatefulSet also passes
# --journal), so a plain `docker run` of the image works too: the default,
# cairn-journal.db in the working directory, is not writable at / for this
# user. Relative paths (e.g. `cairn backup download`) land in /var/lib/cairn.
ENV CAIRN_JOURNAL=/var/lib/cairn/journal/journal.db
WORKDIR /var/lib/cairn
USER 65532:65532
EXPOSE 8085
ENTRYPOINT ["/usr/bin/cairn"]
CMD ["server", "--listen", "0.0.0.0:8085"]

# Dockerfile: the image `cairn install` runs (default name cairn:<version>).
#
#   make image                       # buildah or docker, whichever is here (scripts/image.sh)
#   docker build -t cairn:0.1.0 .    # BuildKit: Docker 23+, or DOCKER_BUILDKIT=1 before
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/cairn:0.1.0 --push .
#
# It needs a builder that sets the platform arguments (BuildKit, buildah,
# podman): Docker's legacy builder (DOCKER_BUILDKIT=0) leaves BUILDPLATFORM
# empty and stops at the first FROM.
#
# Two stages on Debian 12 (bookworm), the distribution cairn is developed
# on: the first builds with the same autotools build as everywhere else
# (./configure && make), the second holds only the binary and the shared
# libraries it links (the -dev packages' runtime halves) plus CA
# certificates for HTTPS to the API server and S3. The server runs as an
# unprivileged user; `cairn install` switches to root only for the fs
# provider, whose hostPath directory the kubelet creates root-owned.
# Nothing is downloaded at run time.
#
# Several architectures: the build stage runs on the build machine's own
# architecture ($BUILDPLATFORM) and, when the target ($TARGETARCH, set by
# buildx or buildah --platform) differs, cross-compiles with Debian's
# crossbuild-essential and the target's -dev packages (multiarch) instead
# of emulating the whole compile; only the runtime stage's apt-get runs
# under emulation (qemu-user-static + binfmt_misc on the build machine).
# BUILD_IMAGE and RUNTIME_IMAGE name the Debian base of each stage (the
# multi-architecture debian:12-slim unless a build makes its own, as
# scripts/image.sh does where Docker Hub cannot be reached).
ARG BUILD_IMAGE=debian:12-slim
ARG RUNTIME_IMAGE=debian:12-slim

FROM --platform=$BUILDPLATFORM $BUILD_IMAGE AS build
ARG TARGETARCH
RUN set -e; \
    native=$(dpkg --print-architecture); target=${TARGETARCH:-$native}; \
    dev="libsqlite3-dev libcurl4-openssl-dev libcjson-dev zlib1g-dev libisal-dev \
      libarchive-dev libmicrohttpd-dev libyaml-dev libssl-dev libwebsockets-dev"; \
    if [ "$target" = "$native" ]; then tools=build-essential; else \
      dpkg --add-architecture "$target"; tools="crossbuild-essential-$target"; \
      dev=$(for p in $dev; do printf '%s:%s ' "$p" "$target"; done); fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $tools dpkg-dev autoconf \
      automake pkg-config $dev; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Generated autotools files may be stale or absent in a checkout: remake them.
RUN set -e; \
    native=$(dpkg --print-architecture); target=${TARGETARCH:-$native}; \
    triplet=$(dpkg-architecture -a"$target" -qDEB_HOST_MULTIARCH 2>/dev/null); \
    autoreconf -fi; mkdir /build; cd /build; \
    if [ "$target" = "$native" ]; then /src/configure --prefix=/usr; else \
      PKG_CONFIG_LIBDIR="/usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig" \
      /src/configure --prefix=/usr --host="$triplet"; fi; \
    make -j"$(nproc)" cairn plugins/csi-snapshotter; \
    "$triplet-strip" cairn plugins/csi-snapshotter; \
    if [ "$target" = "$native" ]; then ./cairn version; fi

FROM $RUNTIME_IMAGE
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libsqlite3-0 libcurl4 libcjson1 zlib1g libisal2 libarchive13 \
      libmicrohttpd12 libyaml-0-2 libssl3 libwebsockets17 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/cairn /usr/bin/cairn
# The plugins shipped with cairn (docs/plugins.md): the CSI snapshotter.
COPY --from=build /build/plugins/csi-snapshotter /usr/libexec/cairn/plugins/csi-snapshotter
ENV CAIRN_PLUGIN_DIR=/usr/libexec/cairn/plugins
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

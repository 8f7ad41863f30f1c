#!/bin/bash
# scripts/image.sh: build cairn's container image and write it as a file
# for nodes that have no registry (an air-gapped edge site).
#
#   bash scripts/image.sh build      make image:      build the Dockerfile
#   bash scripts/image.sh tar        make image-tar:  build if needed, then write
#                                    cairn-<version>-<arch>.oci.tar
#   bash scripts/image.sh base       only make sure the Debian base image exists
#
# The build context is this source tree (.dockerignore keeps build outputs
# out), so uncommitted edits are in the image. With Docker (its engine
# answers `docker info`) the build is `docker build`; else buildah
# (Debian's buildah; `apt-get install buildah` as root), rootful or
# rootless, chroot or OCI isolation, whatever works here.
#
# The archive is an OCI image layout (oci-layout, index.json, blobs/) that
# also carries the docker-archive manifest.json naming the same blobs, as
# `docker save` does since Docker 25: `k3s ctr images import`, `ctr -n
# k8s.io images import`, `docker load`, `podman load` and skopeo's
# oci-archive: and docker-archive: transports all read it. The image is
# named with the full reference kubelet resolves IMAGE to
# (cairn:0.1.0 -> docker.io/library/cairn:0.1.0), so a pod whose image is
# `cairn:0.1.0` with imagePullPolicy IfNotPresent or Never finds it.
#
# Environment:
#   CAIRN_IMAGE        image reference (default cairn:<version of configure.ac>)
#   CAIRN_IMAGE_ARCH   amd64 or arm64 (default: this machine's); another
#                      architecture cross-compiles (see the Dockerfile) and
#                      runs the runtime stage's apt-get under qemu-user
#   CAIRN_IMAGE_TOOL   docker | buildah (default: docker when its engine answers)
#   CAIRN_IMAGE_BASE   auto (default): pull debian:12-slim, else make it with
#                      debootstrap | pull | debootstrap  (buildah only)
#   CAIRN_IMAGE_MIRROR Debian mirror for debootstrap (default: the one apt uses)
#   CAIRN_IMAGE_OUT    archive to write (default ./cairn-<version>-<arch>.oci.tar)
#   CAIRN_IMAGE_SRC    source tree to build (default: the one holding this script)
#   CAIRN_IMAGE_NOCACHE 1: build without the layer cache
#
# This file is also sourced by scripts/image-check.sh for its functions.
set -euo pipefail

img_say() { printf '==> %s\n' "$*" >&2; }
img_die() { printf 'image: FAIL: %s\n' "$*" >&2; exit 1; }

img_init() {
	IMG_SRC=${CAIRN_IMAGE_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
	IMG_VERSION=$(sed -n 's/^AC_INIT(\[cairn\], \[\([^]]*\)\].*/\1/p' "$IMG_SRC/configure.ac")
	[ -n "$IMG_VERSION" ] || img_die "no version in $IMG_SRC/configure.ac"
	IMG_NATIVE=$(dpkg --print-architecture 2>/dev/null || { case $(uname -m) in
		x86_64) echo amd64 ;; aarch64) echo arm64 ;; *) uname -m ;; esac; })
	IMG_ARCH=${CAIRN_IMAGE_ARCH:-$IMG_NATIVE}
	IMG_NAME=${CAIRN_IMAGE:-cairn:$IMG_VERSION}
	IMG_REF=$(img_full_ref "$IMG_NAME")
	IMG_TOOL=${CAIRN_IMAGE_TOOL:-}
	if [ -z "$IMG_TOOL" ]; then
		if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
			IMG_TOOL=docker
		elif command -v buildah >/dev/null; then
			IMG_TOOL=buildah
		else
			img_die "no Docker engine and no buildah: apt-get install buildah (Debian), or run where Docker runs"
		fi
	fi
	# The base of both stages as the Dockerfile names it; buildah keeps a
	# foreign architecture's base under its own name (one name, one image).
	IMG_BASE=docker.io/library/debian:12-slim
	IMG_RUNTIME_BASE=$IMG_BASE
	[ "$IMG_ARCH" = "$IMG_NATIVE" ] || IMG_RUNTIME_BASE=localhost/debian:12-slim-$IMG_ARCH
}

# The reference a container runtime resolves NAME to (docker.io/library/ for
# a bare name, docker.io/ for a one-component path, :latest without a tag).
img_full_ref() {
	local n=$1 first=${1%%/*}
	if [ "$first" = "$n" ] || { [[ $first != *.* ]] && [[ $first != *:* ]] && [ "$first" != localhost; }; then
		case $n in */*) n=docker.io/$n ;; *) n=docker.io/library/$n ;; esac
	fi
	case ${n##*/} in *:*|*@*) ;; *) n=$n:latest ;; esac
	printf '%s\n' "$n"
}

# buildah's isolation: chroot where no OCI runtime can make its namespaces.
img_isolation() {
	[ -z "${IMG_ISO:-}" ] || return 0
	local probe cand
	probe=$(buildah from --pull=never "$IMG_BASE")
	for cand in "--isolation oci --runtime /usr/bin/crun" "--isolation oci --runtime /usr/sbin/runc" "--isolation chroot"; do
		read -r -a IMG_ISO_ARR <<<"$cand"
		if [ -x "${IMG_ISO_ARR[3]:-/bin/sh}" ] && buildah run "${IMG_ISO_ARR[@]}" "$probe" -- true >/dev/null 2>&1; then
			IMG_ISO=$cand
			break
		fi
	done
	buildah rm "$probe" >/dev/null
	[ -n "${IMG_ISO:-}" ] || img_die "buildah cannot run a container here (tried crun, runc, chroot)"
	img_say "buildah runs containers with $IMG_ISO"
}

# debian:12-slim for ARCH from Debian's own packages: a minbase debootstrap
# (a foreign architecture's second stage runs under qemu-user), then what
# the official slim variant does: docs, man pages and translations left out
# and kept out by a dpkg rule, no apt caches, its apt sources, PATH and CMD.
# Not byte-identical to the Docker Hub image, but the same distribution,
# packages and conventions. Committed as NAME.
img_debootstrap() {
	local arch=$1 name=$2 work root ctr mnt mirror
	command -v debootstrap >/dev/null || img_die "debootstrap is missing: apt-get install debootstrap"
	mirror=${CAIRN_IMAGE_MIRROR:-$( { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | grep -v '^[[:space:]]*#' |
		grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ')}
	mirror=${mirror:-http://deb.debian.org/debian}
	mirror=${mirror%/}
	work=$(mktemp -d /tmp/cairn-image-base.XXXXXX)
	root=$work/rootfs
	img_say "debootstrap --arch $arch --variant=minbase bookworm from $mirror"
	debootstrap --arch "$arch" --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log" >&2; rm -rf "$work"; img_die "debootstrap failed"; }
	cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<-'EOF'
	# The "slim" variant: files that containers do not need are excluded,
	# and this rule keeps them that way.
	path-exclude /usr/share/doc/*
	# keep copyright files for legal reasons
	path-include /usr/share/doc/*/copyright
	path-exclude /usr/share/groff/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/linda/*
	path-exclude /usr/share/lintian/overrides/*
	path-exclude /usr/share/locale/*
	path-include /usr/share/locale/locale.alias
	path-exclude /usr/share/man/*
	EOF
	find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$root"/usr/share/{groff,info,linda,man}/* "$root"/usr/share/lintian/overrides/*
	find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
	cat >"$root/etc/apt/apt.conf.d/docker-clean" <<-'EOF'
	DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
	APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
	Dir::Cache::pkgcache "";
	Dir::Cache::srcpkgcache "";
	EOF
	printf 'Acquire::Languages "none";\n' >"$root/etc/apt/apt.conf.d/docker-no-languages"
	rm -f "$root/etc/apt/sources.list"
	cat >"$root/etc/apt/sources.list.d/debian.sources" <<-EOF
	Types: deb
	URIs: $mirror
	Suites: bookworm bookworm-updates
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

	Types: deb
	URIs: $mirror-security
	Suites: bookworm-security
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
		"$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*
	: >"$root/etc/hostname"
	: >"$root/etc/resolv.conf"
	: >"$root/etc/machine-id"
	ctr=$(buildah from --arch "$arch" scratch)
	mnt=$(buildah mount "$ctr")
	tar -C "$root" --numeric-owner --xattrs -cf - . | tar -C "$mnt" --numeric-owner --xattrs -xpf -
	buildah umount "$ctr" >/dev/null
	buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd bash --os linux --arch "$arch" \
		--label org.cairn.base=debootstrap-minbase-bookworm "$ctr"
	buildah commit --quiet --rm "$ctr" "$name" >/dev/null
	rm -rf "$work"
}

# Make sure NAME (debian:12-slim of ARCH) is in buildah's storage.
img_base_one() {
	local arch=$1 name=$2 mode=${CAIRN_IMAGE_BASE:-auto} label err
	if label=$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "org.cairn.base"}}' "$name" 2>/dev/null); then
		img_say "base image $name: present (${label:-pulled})"
		return 0
	fi
	if [ "$mode" != debootstrap ]; then
		img_say "pulling debian:12-slim ($arch) as $name"
		err=$(mktemp)
		if timeout 120 skopeo copy --quiet --override-arch "$arch" docker://docker.io/library/debian:12-slim \
			"containers-storage:$name" >/dev/null 2>"$err"; then
			rm -f "$err"
			return 0
		fi
		[ "$mode" != pull ] || { cat "$err" >&2; img_die "cannot pull debian:12-slim"; }
		img_say "cannot pull ($(tail -n1 "$err" | cut -c1-100)); making it with debootstrap"
		rm -f "$err"
	fi
	img_debootstrap "$arch" "$name"
}

img_base() {
	[ "$IMG_TOOL" = buildah ] || return 0	# docker pulls its bases itself
	img_base_one "$IMG_NATIVE" "$IMG_BASE"
	[ "$IMG_ARCH" = "$IMG_NATIVE" ] || img_base_one "$IMG_ARCH" "$IMG_RUNTIME_BASE"
}

# Build the Dockerfile of IMG_SRC as IMG_NAME for IMG_ARCH; prints the seconds taken.
img_build() {
	local t0 log flags
	img_base
	log=$(mktemp /tmp/cairn-image-build.XXXXXX)
	t0=$(date +%s)
	img_say "building $IMG_NAME for linux/$IMG_ARCH with $IMG_TOOL from $IMG_SRC"
	if [ "$IMG_TOOL" = docker ]; then
		flags=(--platform "linux/$IMG_ARCH" -t "$IMG_NAME" -f "$IMG_SRC/Dockerfile")
		[ "${CAIRN_IMAGE_NOCACHE:-0}" != 1 ] || flags+=(--no-cache)
		DOCKER_BUILDKIT=1 docker build "${flags[@]}" "$IMG_SRC" >"$log" 2>&1 ||
			{ tail -n 40 "$log" >&2; img_die "docker build failed (log: $log)"; }
	else
		img_isolation
		read -r -a flags <<<"$IMG_ISO"
		# No --platform: buildah 1.28 then looks every stage's base up for
		# the target (the native build stage's too). The build stage runs
		# natively and cross-compiles for TARGETARCH; the runtime stage's
		# base is the target's, so it runs (under qemu-user) and the image
		# is of that architecture.
		flags+=(--pull=never --layers --build-arg "TARGETARCH=$IMG_ARCH"
			--build-arg "BUILD_IMAGE=$IMG_BASE" --build-arg "RUNTIME_IMAGE=$IMG_RUNTIME_BASE"
			-f "$IMG_SRC/Dockerfile" -t "$IMG_NAME")
		[ "${CAIRN_IMAGE_NOCACHE:-0}" != 1 ] || flags+=(--no-cache)
		buildah bud "${flags[@]}" "$IMG_SRC" >"$log" 2>&1 ||
			{ tail -n 40 "$log" >&2; img_die "buildah bud failed (log: $log)"; }
	fi
	rm -f "$log"
	IMG_BUILD_S=$(($(date +%s) - t0))
	img_say "built $IMG_NAME (linux/$IMG_ARCH) in ${IMG_BUILD_S}s"
}

# IMG_NAME exists, built for IMG_ARCH (one name holds one architecture:
# the last build's).
img_exists() {
	local a
	if [ "$IMG_TOOL" = docker ]; then
		a=$(docker image inspect -f '{{.Architecture}}' "$IMG_NAME" 2>/dev/null) || return 1
	else
		a=$(buildah inspect --type image --format '{{.OCIv1.Architecture}}' "$IMG_NAME" 2>/dev/null) || return 1
	fi
	[ "$a" = "$IMG_ARCH" ]
}

# Write IMG_NAME as OUT: an OCI archive that also has docker load's manifest.json.
img_tar() {
	local out=${1:-${CAIRN_IMAGE_OUT:-$PWD/cairn-$IMG_VERSION-$IMG_ARCH.oci.tar}} tmp
	img_exists || img_build
	tmp=$(mktemp -d /tmp/cairn-image-tar.XXXXXX)
	if [ "$IMG_TOOL" = docker ]; then
		docker save -o "$tmp/docker.tar" "$IMG_NAME" ||
			img_die "docker save failed"
		skopeo copy --quiet "docker-archive:$tmp/docker.tar" "oci-archive:$tmp/oci.tar:$IMG_REF" ||
			img_die "skopeo (apt-get install skopeo) could not turn docker save's archive into an OCI one"
	else
		buildah push --quiet --format oci "$IMG_NAME" "oci-archive:$tmp/oci.tar:$IMG_REF" >/dev/null ||
			img_die "buildah push to an OCI archive failed"
	fi
	python3 - "$tmp/oci.tar" "$out" "$IMG_REF" "$IMG_NAME" <<-'PY'
	# Name the image in index.json for containerd (io.containerd.image.name:
	# the full reference; org.opencontainers.image.ref.name: the tag) and add
	# docker-archive's manifest.json pointing at the same blobs.
	import io, json, sys, tarfile
	src, dst, ref, name = sys.argv[1:5]
	with tarfile.open(src) as tin, tarfile.open(dst + ".part", "w", format=tarfile.PAX_FORMAT) as tout:
	    members = {m.name.lstrip("./"): m for m in tin.getmembers() if m.isfile()}
	    index = json.load(tin.extractfile(members["index.json"]))
	    (desc,) = index["manifests"]
	    desc["annotations"] = {"io.containerd.image.name": ref,
	                           "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1]}
	    manifest = json.load(tin.extractfile(members["blobs/" + desc["digest"].replace(":", "/")]))
	    blob = lambda d: "blobs/" + d["digest"].replace(":", "/")
	    tag = name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"
	    docker = [{"Config": blob(manifest["config"]), "RepoTags": [tag],
	               "Layers": [blob(l) for l in manifest["layers"]]}]
	    for n, m in sorted(members.items()):
	        if n in ("index.json", "manifest.json"):
	            continue
	        m.name = n
	        tout.addfile(m, tin.extractfile(m))
	    for n, doc in (("index.json", index), ("manifest.json", docker)):
	        data = json.dumps(doc, separators=(",", ":")).encode()
	        ti = tarfile.TarInfo(n)
	        ti.size, ti.mode = len(data), 0o644
	        tout.addfile(ti, io.BytesIO(data))
	PY
	mv "$out.part" "$out"
	rm -rf "$tmp"
	img_say "wrote $out ($(du -m "$out" | cut -f1) MB): $IMG_REF, linux/$IMG_ARCH"
	IMG_TAR=$out
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	[ $# -le 1 ] || img_die "usage: $0 [build|tar|base]"
	img_init
	case ${1:-build} in
	build) img_build ;;
	tar) img_tar ;;
	base) img_base ;;
	*) img_die "usage: $0 [build|tar|base]" ;;
	esac
fi

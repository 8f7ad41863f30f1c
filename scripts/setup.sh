#!/bin/bash
# scripts/setup.sh: make this Debian 12 machine ready to build and test cairn,
# then build it. Idempotent: a second run installs nothing and rebuilds only
# what changed. Run as root (it calls apt-get); used by scripts/demo.sh and
# scripts/test.sh, which is all a user ever needs to call.
#
#   CAIRN_CONFIGURE_FLAGS   extra ./configure flags (e.g. --enable-asan)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }

# Debian packages: build tools, the libraries cairn links, and the tools the
# tests drive (awscli, chromium, wrk, Node.js for s3rver, openssl for TLS).
packages=(
	build-essential autoconf automake libtool pkg-config
	libsqlite3-dev libcurl4-openssl-dev libcjson-dev zlib1g-dev libisal-dev
	libarchive-dev libmicrohttpd-dev libyaml-dev libssl-dev libwebsockets-dev
	sqlite3 python3 python3-yaml python3-cryptography openssl curl ca-certificates
	awscli chromium fonts-dejavu-core wrk nodejs npm tar gzip procps
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
# Node.js may come from elsewhere than Debian (e.g. already on the machine).
if command -v node >/dev/null && command -v npm >/dev/null; then
	missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: missing Debian packages: ${missing[*]}; run this as root" >&2
		exit 1
	fi
	say "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm test dependencies (s3rver), pinned in package-lock.json.
if [ -f package-lock.json ]; then
	stamp=node_modules/.cairn-lock
	if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
		say "installing npm test dependencies (npm ci)"
		npm ci --no-audit --no-fund --loglevel=error
		cp package-lock.json "$stamp"
	fi
fi

# Build in the repository so ./cairn lands at its root.
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
	say "autoreconf"
	autoreconf -fi >/dev/null
fi
flags="${CAIRN_CONFIGURE_FLAGS:-}"
if [ ! -f Makefile ] || [ "$(cat .cairn-configured 2>/dev/null)" != "$flags" ]; then
	built=0
	[ -f Makefile ] && built=1
	say "configure $flags"
	# shellcheck disable=SC2086
	./configure -q $flags
	# objects built with other flags (an ASan build, say) do not look
	# stale to make: build everything again
	if [ "$built" = 1 ]; then
		say "configure flags changed: make clean"
		make clean >/dev/null
	fi
	echo "$flags" >.cairn-configured
fi
say "make"
make -j"$(nproc)" >/dev/null
say "built $(./cairn version | head -1)"

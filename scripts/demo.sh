#!/bin/bash
# scripts/demo.sh: cairn's main job end to end on the embedded defaults.
# Installs what is missing, builds, then: starts the Kubernetes API stand-in
# (tests/kubesim) seeded with a sample application, installs cairn's CRDs,
# creates a local-directory storage location, starts `cairn server`, runs a
# backup with visible progress and lists what the tarball holds.
# Everything lives in a temp directory that is removed at the end
# (CAIRN_DEMO_KEEP=1 keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec python3 scripts/demo.py "$@"

#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1 for the tests and benchmarks:
#   scripts/controlplane.sh build | path NAME | start DIR | stop DIR
#                           | restart-apiserver DIR | restart-etcd DIR | versions
# The logic lives in core/testing/controlplane.py (standard library only, so this runs
# before any virtual environment exists). Binaries are cached under
# ${CLUSTERSCALER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/clusterscaler}/controlplane/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "${PYTHON:-python3}" "$here/../core/testing/controlplane.py" "$@"

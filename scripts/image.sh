#!/usr/bin/env bash
# The container image of deploy/Dockerfile, built and started without a Docker engine or a
# registry, with Debian's buildah, podman, runc and debootstrap:
#   scripts/image.sh base | build [--rebuild] | check [--rebuild]
# The logic lives in core/testing/image.py (standard library only, so this runs before any
# virtual environment exists). The stand-in base, the container storage and the image live
# under ${CLUSTERSCALER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/clusterscaler}/image/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "${PYTHON:-python3}" "$here/../core/testing/image.py" "$@"

#!/usr/bin/env bash
# Build the wheel set of the container image into DIR: one wheel per distribution of this
# repository (the core and every provider) and one per dependency, at the versions of
# constraints.txt. deploy/Dockerfile installs exactly this set; .ci/run builds it too, so a
# dependency that cannot be resolved or built fails CI even where docker is absent.
#
#   scripts/wheels.sh DIR
#
# All distributions go through one resolver run: the providers require `clusterscaler`,
# which only the local project in the same run provides (it is not on any index).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/wheels.sh DIR}
PYTHON=${PYTHON:-python3}
dists=(.)
for dist in providers/*/; do
  [ -f "$dist/pyproject.toml" ] && dists+=("${dist%/}")
done
"$PYTHON" -m pip wheel --disable-pip-version-check -q -c constraints.txt \
  --wheel-dir "$out" "${dists[@]}" \
  2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
echo "wheels for ${dists[*]} in $out"

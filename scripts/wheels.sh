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
#
# pip builds a local project in its own folder, where setuptools leaves build/ and
# *.egg-info behind, and a build/ left by an earlier run can put modules deleted since into
# the wheel. So the distributions are built from a copy of their sources in a temporary
# folder (the files at the root and core/, plugins/, providers/, as deploy/Dockerfile copies
# them, without build output), removed on exit: the working tree is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/wheels.sh DIR}
PYTHON=${PYTHON:-python3}
# setup.py records the commit in the wheel for `clusterscaler --version`; the copy below has
# no .git to ask, so it is read here (deploy/Dockerfile passes it as a build argument).
if [ -z "${CLUSTERSCALER_COMMIT:-}" ]; then
  CLUSTERSCALER_COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
fi
export CLUSTERSCALER_COMMIT
case "$out" in /*) ;; *) out="$(pwd)/$out" ;; esac
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
find . -maxdepth 1 -type f ! -name '.*' -exec cp {} "$src/" \;
tar -c --exclude='providers/*/build' --exclude='*.egg-info' --exclude='__pycache__' \
  core plugins providers | tar -x -C "$src"
dists=("$src")
names=(.)
for dist in providers/*/; do
  [ -f "$dist/pyproject.toml" ] || continue
  dists+=("$src/${dist%/}")
  names+=("${dist%/}")
done
"$PYTHON" -m pip wheel --disable-pip-version-check -q -c constraints.txt \
  --wheel-dir "$out" "${dists[@]}" \
  2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
echo "wheels for ${names[*]} in $out"

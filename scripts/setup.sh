#!/usr/bin/env bash
# Create a virtual environment and install every distribution of this repository into it,
# editable, with the test dependencies: the core (`clusterscaler`), each provider under
# providers/, and the example third-party plugin under docs/examples/.
#
#   scripts/setup.sh            # -> .venv
#   VENV=/tmp/venv scripts/setup.sh
#
# Versions are held by constraints.txt so that installs resolve quickly and repeatably.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
args=(-e ".[dev]")
for dist in providers/*/; do
  [ -f "$dist/pyproject.toml" ] || continue
  if grep -q '^test *=' "$dist/pyproject.toml"; then
    args+=(-e "${dist%/}[test]")
  else
    args+=(-e "${dist%/}")
  fi
done
for dist in docs/examples/*/; do
  [ -f "$dist/pyproject.toml" ] && args+=(-e "${dist%/}")
done
# Some machines configure extra package indexes that do not exist; pip warns once per
# package about them, which would bury real errors.
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -c constraints.txt "${args[@]}" \
  2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
echo "installed into $VENV: ${args[*]}"

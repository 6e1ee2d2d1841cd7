#!/usr/bin/env bash
# Type-check the core, the standard plugins, every provider distribution and the benchmarks
# (`bench/`) with mypy.
#
# `core/` is the import package `clusterscaler` and `plugins/` is `clusterscaler.plugins`
# only through the package-dir mapping in pyproject.toml, which mypy cannot follow through an
# editable install. So we lay out the same package tree with symbolic links and point mypy at it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PYTHON=${PYTHON:-$root/.venv/bin/python}
case "$PYTHON" in /*) ;; *) PYTHON="$root/$PYTHON" ;; esac  # we cd below
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/clusterscaler"
for entry in "$root"/core/*; do
  ln -s "$entry" "$tree/clusterscaler/$(basename "$entry")"
done
ln -s "$root/plugins" "$tree/clusterscaler/plugins"
ln -s "$root/bench" "$tree/bench"
mypy_path="$tree"
packages=(-p clusterscaler -p bench)
for dist in "$root"/providers/*/; do
  [ -f "$dist/pyproject.toml" ] || continue
  for pkg in "$dist"clusterscaler_*/; do
    [ -f "$pkg/__init__.py" ] || continue
    mypy_path="$mypy_path:${dist%/}"
    packages+=(-p "$(basename "$pkg")")
  done
done
cd "$tree"
MYPYPATH="$mypy_path" "$PYTHON" -m mypy --config-file "$root/pyproject.toml" \
  --cache-dir "$root/.mypy_cache" "${packages[@]}" "$@"

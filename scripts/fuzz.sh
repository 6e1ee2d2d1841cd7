#!/usr/bin/env bash
# The long fuzz run (docs/testing.md): every fuzz target of tests/core/hostile, or the ones
# named, for COUNT random examples each, drawn from SEED, at a low priority, one process.
#
#   scripts/fuzz.sh SEED [COUNT] [PYTEST ARGS...]
#   scripts/fuzz.sh 1 100000                                       # every target
#   scripts/fuzz.sh 7 100000 tests/core/hostile/test_fuzz_files.py -k snapshot
#   nohup scripts/fuzz.sh 1 100000 > fuzz.log 2>&1 &              # in the background
#
# A failure prints the example and its `@reproduce_failure` blob; the same SEED and COUNT
# draw the same examples again. Each target's time is printed at the end (--durations).
set -euo pipefail
cd "$(dirname "$0")/.."
seed=${1:?usage: scripts/fuzz.sh SEED [COUNT] [PYTEST ARGS...]}
count=${2:-100000}
shift $(( $# < 2 ? $# : 2 ))
[ $# -gt 0 ] || set -- tests/core/hostile
PYTHON=${PYTHON:-.venv/bin/python}
# A reader whose memory runs away fails with MemoryError instead of taking the machine's
# (FUZZ_MEMORY_KB, 8 GiB of address space by default).
ulimit -v "${FUZZ_MEMORY_KB:-8388608}"
CLUSTERSCALER_FUZZ_EXAMPLES=$count exec nice -n 15 "$PYTHON" -m pytest -p no:cacheprovider \
  -o timeout=0 -m fuzz --hypothesis-profile=fuzz --hypothesis-seed="$seed" \
  --durations=0 -q "$@"

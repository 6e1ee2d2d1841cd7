"""Benchmarks of clusterscaler at upstream scale.

`python -m bench` generates the scenarios of `bench/scenarios/` as Kubernetes JSON
snapshots with `sim` cloud-configs, runs one loop per scenario exactly as
`clusterscaler simulate --once` would, checks the decision and reports wall time, peak RSS
and the ratio to the time of merely `json.load`-ing the snapshot (see `bench/run.py`).
"""

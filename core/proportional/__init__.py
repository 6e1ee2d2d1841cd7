"""The cluster-proportional-autoscaler: scale workloads with the size of the cluster.

`clusterscaler proportional` keeps the replica count of Deployments, ReplicaSets,
StatefulSets and ReplicationControllers proportional to the number of nodes and cores, with
the parameters (`linear` or `ladder`) read from a ConfigMap on every poll, exactly as the
upstream cluster-proportional-autoscaler does. `clusterscaler proportional calc` evaluates
the same parameters offline.

Modules: `params` (parse and validate), `calculator` (pure replica arithmetic),
`clustersize` (node counting), `controller` (one poll against the API server), `server`
(`/healthz`, `/last-poll`), `cli` (flags and the run loop).
"""

from __future__ import annotations

from clusterscaler.proportional.calculator import ClusterSize, Decision, compute_replicas
from clusterscaler.proportional.params import (
    LadderParams,
    LadderStep,
    LinearParams,
    Params,
    ParamsError,
    parse_configmap_data,
    parse_params_document,
)

__all__ = [
    "ClusterSize",
    "Decision",
    "LadderParams",
    "LadderStep",
    "LinearParams",
    "Params",
    "ParamsError",
    "compute_replicas",
    "parse_configmap_data",
    "parse_params_document",
]

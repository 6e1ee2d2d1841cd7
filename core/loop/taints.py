"""The autoscaler's taints and CA's taint rules.

Ours: `ToBeDeletedByClusterAutoscaler` (NoSchedule, on a node being deleted) and
`DeletionCandidateOfClusterAutoscaler` (PreferNoSchedule, on an unneeded node). CA's rules
(`TaintConfig`): a startup taint (`--startup-taint`, the `startup-taint.` and deprecated
`ignore-taint.` prefixes) means the node has not started yet; a status taint
(`--status-taint`, the `status-taint.` prefix) leaves it Ready; node-condition taints are
transient. Startup, status and condition taints are dropped from template nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterscaler.model import Node

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
DELETION_CANDIDATE_TAINT = "DeletionCandidateOfClusterAutoscaler"

# Taint key prefixes with a meaning for the autoscaler, as upstream. `ignore-taint.` is the
# deprecated spelling of `startup-taint.` and behaves the same.
IGNORE_TAINT_PREFIX = "ignore-taint.cluster-autoscaler.kubernetes.io/"
STARTUP_TAINT_PREFIX = "startup-taint.cluster-autoscaler.kubernetes.io/"
STATUS_TAINT_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"


# Taints that stand for a transient node condition (CA's NodeConditionTaints): the node
# lifecycle controller, the cloud controller manager and cloud agents put them on nodes
# that are not (yet, or no longer) healthy. A new node does not start with them.
NODE_CONDITION_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/pid-pressure",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "node.cloudprovider.kubernetes.io/shutdown",
    "cloud.google.com/impending-node-termination",
    "NodeWithImpairedVolumes",
)
# Taint keys counted under their own name by `TaintConfig.report_type` (CA's
# explicitlyReportedTaints); the others are counted by kind.
_REPORTED_BY_KEY = frozenset(
    (TO_BE_DELETED_TAINT, DELETION_CANDIDATE_TAINT, *NODE_CONDITION_TAINTS)
)


def taint_key(value: str) -> str:
    """The key of a taint named on the command line. CA's flags take keys; a `key=value`
    or `key:Effect` (or both) is accepted too, since a taint key never contains `=` or
    `:`."""
    return value.split("=", 1)[0].split(":", 1)[0].strip()


@dataclass(frozen=True, slots=True)
class TaintConfig:
    """Which taints are startup taints and which are status taints (CA's TaintConfig).

    Startup taints (`--startup-taint`, `--ignore-taint`, `--startup-taint-prefix` and the
    `startup-taint.` / `ignore-taint.cluster-autoscaler.kubernetes.io/` prefixes) mark a
    node that is still initialising: while it carries one, a Ready node counts as not
    started (upcoming capacity) and, after --max-node-startup-time, as unready. Status
    taints (`--status-taint` and the `status-taint.cluster-autoscaler.kubernetes.io/`
    prefix) describe a transient state of a Ready node: it stays Ready, and the taint keeps
    pods off it in simulations as it does in the scheduler. Template nodes drop both.
    """

    startup_keys: frozenset[str] = frozenset()
    status_keys: frozenset[str] = frozenset()
    startup_prefixes: tuple[str, ...] = (IGNORE_TAINT_PREFIX, STARTUP_TAINT_PREFIX)
    status_prefixes: tuple[str, ...] = (STATUS_TAINT_PREFIX,)

    @classmethod
    def from_options(cls, options: AutoscalingOptions) -> TaintConfig:
        startup = {taint_key(t) for t in (*options.ignore_taint, *options.startup_taint)}
        status = {taint_key(t) for t in options.status_taint}
        prefixes = tuple(p for p in options.startup_taint_prefix if p)
        return cls(
            startup_keys=frozenset(k for k in startup if k),
            status_keys=frozenset(k for k in status if k),
            startup_prefixes=(IGNORE_TAINT_PREFIX, STARTUP_TAINT_PREFIX, *prefixes),
        )

    def is_startup(self, key: str) -> bool:
        return key in self.startup_keys or key.startswith(self.startup_prefixes)

    def is_status(self, key: str) -> bool:
        return key in self.status_keys or key.startswith(self.status_prefixes)

    def report_type(self, key: str) -> str:
        """The `type` a taint is counted under in `cluster_autoscaler_node_taints_count`,
        as CA's getTaintTypeToReport: the deprecated `ignore-taint.` prefix itself, the key
        of the autoscaler's and node-condition taints, `startup-taint`, `status-taint`, or
        `other`."""
        if key.startswith(IGNORE_TAINT_PREFIX):
            return IGNORE_TAINT_PREFIX
        if key in _REPORTED_BY_KEY:
            return key
        if self.is_startup(key):
            return "startup-taint"
        if self.is_status(key):
            return "status-taint"
        return "other"

    def count_node_taints(self, nodes: Iterable[Node]) -> dict[str, int]:
        """Taints on `nodes` per `report_type` (CA's CountNodeTaints)."""
        out: dict[str, int] = {}
        for node in nodes:
            for t in node.taints:
                kind = self.report_type(t.key)
                out[kind] = out.get(kind, 0) + 1
        return out

    def startup_taint(self, node: Node) -> str | None:
        """The key of the first startup taint on `node`, or None."""
        for t in node.taints:
            if self.is_startup(t.key):
                return t.key
        return None

"""`explain` on a real cluster, readable at a glance: the answers grouped by reason with
counts (the summary, printed first), and the details narrowed by `--pod`, `--node` and
`--node-group`.

`--pod` and `--node` take names (`namespace/name` for a pod) with `*` and `?` as wildcards
and are repeatable; `--node-group` is a group's name, repeatable. `--pod` narrows the pending
pods, `--node` the nodes, `--node-group` both (a pod keeps only that group's answers, the
nodes only that group's members). A filter that matches nothing in the cluster is an error
naming it.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clusterscaler.model import ClusterObjects
from clusterscaler.offline import output
from clusterscaler.offline.loader import InputError

if TYPE_CHECKING:
    from clusterscaler.commands.explain_report import Report

POD, NODE, NODE_GROUP = "--pod", "--node", "--node-group"
# A pod's answer that holds for every group (`explain.ALL_GROUPS`).
_ALL_GROUPS = "*"


def add_filter_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        POD,
        action="append",
        default=[],
        dest="pod_filters",
        metavar="NS/NAME",
        help="Show only these pending pods (namespace/name; * and ? match any characters). "
        "Repeatable.",
    )
    group.add_argument(
        NODE,
        action="append",
        default=[],
        dest="node_filters",
        metavar="NAME",
        help="Show only these nodes (* and ? match any characters). Repeatable.",
    )
    group.add_argument(
        NODE_GROUP,
        action="append",
        default=[],
        dest="node_group_filters",
        metavar="NAME",
        help="Show only this node group's answers for pods, and its nodes. Repeatable.",
    )


@dataclass(frozen=True, slots=True)
class Filters:
    pods: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    node_groups: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Filters:
        return cls(
            tuple(getattr(args, "pod_filters", None) or ()),
            tuple(getattr(args, "node_filters", None) or ()),
            tuple(getattr(args, "node_group_filters", None) or ()),
        )

    def __bool__(self) -> bool:
        return bool(self.pods or self.nodes or self.node_groups)

    def pod(self, key: str) -> bool:
        return not self.pods or any(fnmatch.fnmatchcase(key, p) for p in self.pods)

    def node(self, name: str) -> bool:
        return not self.nodes or any(fnmatch.fnmatchcase(name, p) for p in self.nodes)

    def group(self, name: str) -> bool:
        return not self.node_groups or name in self.node_groups or name == _ALL_GROUPS

    def check(self, objects: ClusterObjects, groups: Sequence[str]) -> None:
        """Refuse a filter that matches nothing in the cluster (most likely a typo)."""
        pods = [p.key for p in objects.pods]
        for pattern in self.pods:
            if not any(fnmatch.fnmatchcase(k, pattern) for k in pods):
                raise InputError(
                    f"{POD} {pattern!r}: expected a pod of the cluster as namespace/name "
                    "(* and ? as wildcards); none matches"
                )
        nodes = [n.name for n in objects.nodes]
        for pattern in self.nodes:
            if not any(fnmatch.fnmatchcase(n, pattern) for n in nodes):
                raise InputError(
                    f"{NODE} {pattern!r}: expected a node of the cluster (* and ? as "
                    "wildcards); none matches"
                )
        for name in self.node_groups:
            if name not in groups:
                raise InputError(
                    f"{NODE_GROUP} {name!r}: expected one of {', '.join(sorted(groups)) or '(none)'}"
                )


def narrow(report: Report, filters: Filters) -> Report:
    """`report` with only the pods, groups and nodes `filters` keep."""
    if not filters:
        return report
    pods = []
    for pod in report.pods:
        if not filters.pod(pod.pod):
            continue
        verdicts = tuple(v for v in pod.verdicts if filters.group(v.node_group))
        if verdicts:
            pods.append(dataclasses.replace(pod, verdicts=verdicts))
    nodes = tuple(
        n
        for n in report.nodes
        if filters.node(n.node) and (not filters.node_groups or n.node_group in filters.node_groups)
    )
    return dataclasses.replace(report, pods=tuple(pods), nodes=nodes)


def narrow_json(doc: dict[str, Any], report: Report, filters: Filters) -> dict[str, Any]:
    """The keys of `explain --json` with only what `filters` keep (`report` is already
    narrowed: its nodes are the ones kept)."""
    if not filters:
        return doc
    kept_nodes = {n.node for n in report.nodes}
    out = dict(doc)
    for key in ("unschedulable", "pendingPods"):
        if key not in doc:
            continue
        entries = []
        for entry in doc[key]:
            if not filters.pod(entry["pod"]):
                continue
            entry = dict(entry)
            for field in ("reasons", "nodeGroups"):
                if isinstance(entry.get(field), dict):
                    entry[field] = {g: v for g, v in entry[field].items() if filters.group(g)}
            if key == "pendingPods" and not entry["nodeGroups"]:
                continue  # as in the table: a pod with no answer of the groups kept
            entries.append(entry)
        out[key] = entries
    for key in ("scaleDown", "unremovable"):
        if key in doc:
            out[key] = [e for e in doc[key] if e.get("node") in kept_nodes]
    if "scaleUp" in doc:
        ups = []
        for entry in doc["scaleUp"]:
            if not filters.group(entry["nodeGroup"]):
                continue
            pods = [p for p in entry.get("pods", []) if filters.pod(p)]
            if pods or not filters.pods:
                ups.append({**entry, "pods": pods})
        out["scaleUp"] = ups
    return out


# --------------------------------------------------------------------------- summary


def summary(report: Report) -> dict[str, Any]:
    """The answers grouped by reason with counts, most frequent first: per pending pod and
    group (`pendingPods`: `count`, `nodeGroup`, `helps`, `why`), per node (`nodes`:
    `count`, `removable`, `reason`)."""
    pods = Counter((v.node_group, v.helps, v.why) for p in report.pods for v in p.verdicts)
    nodes = Counter((n.removable, n.reason) for n in report.nodes)
    return {
        "pendingPods": [
            {"count": c, "nodeGroup": g, "helps": h, "why": w}
            for (g, h, w), c in sorted(
                pods.items(), key=lambda x: (-x[1], not x[0][1], x[0][0], x[0][2])
            )
        ],
        "nodes": [
            {"count": c, "removable": r, "reason": why}
            for (r, why), c in sorted(nodes.items(), key=lambda x: (-x[1], not x[0][0], x[0][1]))
        ],
    }


def render_summary(report: Report) -> str:
    """The summary as two tables, before the details."""
    doc = summary(report)
    lines = ["Summary"]
    if doc["pendingPods"]:
        rows = [
            (str(e["count"]), e["nodeGroup"], "yes" if e["helps"] else "no", e["why"])
            for e in doc["pendingPods"]
        ]
        lines.append(output.render_table(("PODS", "NODE GROUP", "NEW NODE HELPS", "WHY"), rows))
    else:
        lines.append("no pending pods")
    if doc["nodes"]:
        node_rows = [
            (str(e["count"]), "yes" if e["removable"] else "no", e["reason"]) for e in doc["nodes"]
        ]
        lines += ["", output.render_table(("NODES", "REMOVABLE", "REASON"), node_rows)]
    return "\n".join(lines)

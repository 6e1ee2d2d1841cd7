"""Node groups inferred from a real cluster's snapshot, for `simulate` and `explain` without
a cloud-config.

A snapshot of an EKS, GKE, AKS, kops, OpenShift or Cluster API cluster names each node's
node group in a well-known label (or, for machines, an annotation); nodes are grouped by
the first of these they carry, and each group is named by the value (`ng-general`):

| key | platform |
|---|---|
| `clusterscaler.io/node-group` | nodes the `sim` provider made (a simulated cluster's snapshot) |
| `eks.amazonaws.com/nodegroup` | EKS managed node groups |
| `alpha.eksctl.io/nodegroup-name` | eksctl node groups |
| `cloud.google.com/gke-nodepool` | GKE node pools |
| `kubernetes.azure.com/agentpool`, `agentpool` | AKS agent pools |
| `kops.k8s.io/instancegroup` | kops instance groups |
| labels `cluster.x-k8s.io/deployment-name`, `cluster.x-k8s.io/set-name`, `machine.openshift.io/cluster-api-machineset` | Cluster API / Machine API, when the labels are propagated to nodes |
| annotations `cluster.x-k8s.io/owner-kind: MachineSet` with `cluster.x-k8s.io/owner-name` | Cluster API machine sets |
| annotations `machine.openshift.io/machine`, `cluster.x-k8s.io/machine` | a machine `<machine set>-<5 characters>`, as a MachineSet names its machines |

Nodes that are not in any group are listed with the reason: Karpenter's nodes
(`karpenter.sh/nodepool`: Karpenter provisions nodes itself, it has no node groups), EKS
Fargate nodes, virtual-kubelet nodes (AKS virtual nodes), control-plane nodes (a group of
them would be scaled down when empty), and nodes with none of the keys above.

Bounds come from `--nodes=<min>:<max>:<group>` and a `--node-group-bounds` YAML file
(`--nodes` wins), else min 0 and max 1000 as Cluster Autoscaler's label-based discovery
assumes; the output says which values were assumed.

The groups become a `sim` cloud-config: every member node is labelled
`clusterscaler.io/node-group=<group>` in the in-memory copy of the cluster (the snapshot
file is not changed), which is how the `sim` provider knows its nodes, and new nodes copy
one of the group's nodes as the loop's templates do.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterscaler.model import ClusterObjects, Node
from clusterscaler.model.yamltext import MAX_CONFIG_FILE_BYTES, YamlFileError, read_yaml_file
from clusterscaler.offline.loader import InputError
from clusterscaler.offline.output import render_table

# The `sim` provider's group label (clusterscaler.plugins.sim.config.NODE_GROUP_LABEL; the
# core does not import plugins).
NODE_GROUP_LABEL = "clusterscaler.io/node-group"
DEFAULT_MIN_SIZE = 0
DEFAULT_MAX_SIZE = 1000

# In the order a node's group is looked up: the first key a node carries names its group.
GROUP_LABELS: tuple[str, ...] = (
    NODE_GROUP_LABEL,
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "kops.k8s.io/instancegroup",
    "cluster.x-k8s.io/deployment-name",
    "cluster.x-k8s.io/set-name",
    "machine.openshift.io/cluster-api-machineset",
)
CAPI_OWNER_KIND = "cluster.x-k8s.io/owner-kind"
CAPI_OWNER_NAME = "cluster.x-k8s.io/owner-name"
MACHINE_ANNOTATIONS: tuple[str, ...] = ("machine.openshift.io/machine", "cluster.x-k8s.io/machine")
KARPENTER_LABELS: tuple[str, ...] = ("karpenter.sh/nodepool", "karpenter.sh/provisioner-name")
FARGATE_LABEL = "eks.amazonaws.com/compute-type"
VIRTUAL_KUBELET_LABEL = "type"
CONTROL_PLANE_LABELS: tuple[str, ...] = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)
# A machine a MachineSet created: `<machine set>-<5 random characters>` (generateName).
_MACHINE_NAME = re.compile(r"^(?P<set>.+)-[a-z0-9]{5}$")
_GROUP_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_GROUP_NAME_FORM = "letters, digits, '-', '_' or '.', alphanumeric at both ends, at most 63 characters"
BOUNDS_FORM = "<min>:<max>:<node group> with non-negative integers and min <= max"
BOUNDS_FILE_FORM = "nodeGroups: {<node group>: {minSize: <int>, maxSize: <int>, price: <per node-hour>}}"
ASSUMED = "assumed"


@dataclass(frozen=True, slots=True)
class Bounds:
    """A group's size bounds, and where they come from (`--nodes`, a file, or `assumed`
    for each value not given)."""

    min_size: int | None = None
    max_size: int | None = None
    source: str = ""
    # Where they were given, for messages: `--nodes='1:5:ng'`, `bounds.yaml: nodeGroups.ng`.
    where: str = ""
    # The price of a node-hour, when the bounds file gives it.
    price: float | None = None


@dataclass(frozen=True, slots=True)
class InferredGroup:
    """A node group found in the snapshot."""

    name: str
    # The label or annotation that names the group.
    inferred_from: str
    nodes: tuple[str, ...]
    min_size: int
    max_size: int
    # Where the bounds come from: "--nodes", a bounds file's path, or "assumed".
    bounds_from: str
    # The bounds that were not given ("minSize", "maxSize"): upstream's defaults were used.
    assumed: tuple[str, ...]
    # The price of a node-hour, when known (the bounds file's `price`).
    price: float | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "inferredFrom": self.inferred_from,
            "nodes": len(self.nodes),
            "minSize": self.min_size,
            "maxSize": self.max_size,
            "boundsFrom": self.bounds_from,
            "assumed": list(self.assumed),
        }
        if self.price is not None:
            doc["price"] = self.price
        return doc


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A node (or a node group) the simulation leaves out, and why: a node in no inferred
    or provider group, a provider group it cannot use."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Inference:
    """The node groups of a snapshot and the nodes left out, in name order."""

    groups: tuple[InferredGroup, ...]
    not_inferred: tuple[LeftOut, ...]

    def cloud_config(self) -> dict[str, Any]:
        """The `sim` cloud-config of the groups (members carry the group label, see
        `label_members`)."""
        return {
            "nodeGroups": [
                {
                    "name": g.name,
                    "minSize": g.min_size,
                    "maxSize": g.max_size,
                    "nodeSelector": {NODE_GROUP_LABEL: g.name},
                    **({"price": g.price} if g.price is not None else {}),
                }
                for g in self.groups
            ]
        }

    def label_members(self, objects: ClusterObjects) -> ClusterObjects:
        """`objects` with every member node labelled with its group (copies: the parsed
        snapshot is left as it was)."""
        group_of = {node: g.name for g in self.groups for node in g.nodes}
        nodes = []
        for node in objects.nodes:
            group = group_of.get(node.name)
            if group is not None:
                node = node.with_(labels={**node.labels, NODE_GROUP_LABEL: group})
            nodes.append(node)
        return dataclasses.replace(objects, nodes=nodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "inferredNodeGroups": [g.to_json() for g in self.groups],
            "notInferred": [{"node": n.name, "reason": n.reason} for n in self.not_inferred],
        }


def _valid_name(name: str) -> bool:
    return bool(_GROUP_NAME.match(name))


def _node_group(node: Node) -> tuple[str, str] | str:
    """(group name, key it comes from), or the reason the node has no group."""
    labels, annotations = node.labels, node.annotations
    for key in KARPENTER_LABELS:
        if key in labels:
            return (
                f"provisioned by Karpenter ({key}={labels[key]}): Karpenter creates nodes "
                "itself, it is not a node group"
            )
    if labels.get(FARGATE_LABEL) == "fargate":
        return f"EKS Fargate node ({FARGATE_LABEL}=fargate): one pod per node, not a node group"
    if labels.get(VIRTUAL_KUBELET_LABEL) == "virtual-kubelet":
        return (
            f"virtual node ({VIRTUAL_KUBELET_LABEL}=virtual-kubelet): pods run on a serverless "
            "backend, not on machines of a node group"
        )
    for key in CONTROL_PLANE_LABELS:
        if key in labels:
            return f"control-plane node ({key}): not autoscaled"
    for key in GROUP_LABELS:
        value = labels.get(key)
        if value is None:
            continue
        if not _valid_name(value):
            return f"label {key}: expected a node group name ({_GROUP_NAME_FORM}), got {value!r}"
        return value, key
    if annotations.get(CAPI_OWNER_KIND) == "MachineSet" and CAPI_OWNER_NAME in annotations:
        value = annotations[CAPI_OWNER_NAME]
        if not _valid_name(value):
            return (
                f"annotation {CAPI_OWNER_NAME}: expected a MachineSet name "
                f"({_GROUP_NAME_FORM}), got {value!r}"
            )
        return value, CAPI_OWNER_NAME
    for key in MACHINE_ANNOTATIONS:
        machine = annotations.get(key)
        if machine is None:
            continue
        name = machine.rpartition("/")[2]
        match = _MACHINE_NAME.match(name)
        if match is None or not _valid_name(match["set"]):
            return (
                f"annotation {key}: machine {machine!r} is not named as a MachineSet names "
                "its machines (<machine set>-<5 characters>): not in a machine set"
            )
        return match["set"], key
    return "no node-group label (" + ", ".join(GROUP_LABELS[1:7]) + ", ...) or machine annotation"


def infer_node_groups(
    nodes: Iterable[Node], bounds: Mapping[str, Bounds] | None = None
) -> Inference:
    """Group `nodes` by the keys of the module docstring, with `bounds` per group name.

    A group name given by two different keys (nodes labelled `agentpool: x` and others
    `kops.k8s.io/instancegroup: x`) keeps the key that comes first in the lookup order; the
    other nodes are left out with the reason, rather than merged on a guess.
    """
    bounds = bounds or {}
    members: dict[tuple[str, str], list[str]] = {}
    left_out: list[LeftOut] = []
    for node in nodes:
        found = _node_group(node)
        if isinstance(found, str):
            left_out.append(LeftOut(node.name, found))
        else:
            members.setdefault(found, []).append(node.name)
    order = {key: i for i, key in enumerate((*GROUP_LABELS, CAPI_OWNER_NAME, *MACHINE_ANNOTATIONS))}
    chosen: dict[str, str] = {}
    for name, key in sorted(members, key=lambda k: (k[0], order[k[1]])):
        chosen.setdefault(name, key)
    groups: list[InferredGroup] = []
    for (name, key), node_names in sorted(members.items()):
        if chosen[name] != key:
            left_out.extend(
                LeftOut(
                    n,
                    f"{key} names node group {name!r}, which other nodes' {chosen[name]} "
                    "names too: expected one key per node group",
                )
                for n in node_names
            )
            continue
        given = bounds.get(name, Bounds())
        assumed = tuple(
            field
            for field, value in (("minSize", given.min_size), ("maxSize", given.max_size))
            if value is None
        )
        min_size = given.min_size if given.min_size is not None else DEFAULT_MIN_SIZE
        max_size = given.max_size if given.max_size is not None else max(DEFAULT_MAX_SIZE, min_size)
        groups.append(
            InferredGroup(
                name=name,
                inferred_from=key,
                nodes=tuple(sorted(node_names)),
                min_size=min_size,
                max_size=max_size,
                bounds_from=given.source if given.source and len(assumed) < 2 else ASSUMED,
                assumed=assumed,
                price=given.price,
            )
        )
    unknown = sorted(set(bounds) - {g.name for g in groups})
    if unknown:
        names = ", ".join(g.name for g in groups) or "none"
        raise InputError(
            f"{bounds[unknown[0]].where}: node group {unknown[0]!r}: expected one of the node "
            f"groups inferred from the snapshot ({names})"
        )
    return Inference(tuple(groups), tuple(sorted(left_out, key=lambda n: n.name)))


# --------------------------------------------------------------------------- bounds


def parse_nodes_flags(values: Sequence[str]) -> dict[str, Bounds]:
    """`--nodes=<min>:<max>:<group>` values, as Cluster Autoscaler's providers take them."""
    out: dict[str, Bounds] = {}
    for value in values:
        where = f"--nodes={value!r}"
        parts = value.split(":", 2)
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts[:2]) or not parts[2]:
            raise InputError(f"{where}: expected {BOUNDS_FORM}")
        low, high, name = int(parts[0]), int(parts[1]), parts[2]
        if high < low:
            raise InputError(f"{where}: max: expected an integer >= min ({low}), got {high}")
        if name in out:
            raise InputError(f"{where}: node group {name!r}: given more than once")
        out[name] = Bounds(low, high, "--nodes", where)
    return out


def _size(value: Any, where: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}.{field}: expected a non-negative integer, got {value!r}")
    return value


def parse_bounds_doc(doc: Any, source: str) -> dict[str, Bounds]:
    """A `--node-group-bounds` document: `nodeGroups: {<group>: {minSize, maxSize}}`, each
    value optional (the missing one is assumed)."""
    if not isinstance(doc, Mapping) or set(doc) != {"nodeGroups"}:
        got = sorted(str(k) for k in doc) if isinstance(doc, Mapping) else type(doc).__name__
        raise InputError(f"{source}: expected {BOUNDS_FILE_FORM}, got {got!r}")
    groups = doc["nodeGroups"]
    if not isinstance(groups, Mapping):
        raise InputError(
            f"{source}: nodeGroups: expected a map of node group name to "
            f"{{minSize, maxSize}}, got {groups!r}"
        )
    out: dict[str, Bounds] = {}
    for name, raw in groups.items():
        where = f"{source}: nodeGroups.{name}"
        if not isinstance(name, str) or not _valid_name(name):
            raise InputError(f"{source}: nodeGroups: expected node group names ({_GROUP_NAME_FORM}), got {name!r}")
        if not isinstance(raw, Mapping) or not raw or set(raw) - {"minSize", "maxSize", "price"}:
            raise InputError(
                f"{where}: expected {{minSize: <int>, maxSize: <int>, price: <per node-hour>}} "
                f"(each may be left out), got {raw!r}"
            )
        low = _size(raw["minSize"], where, "minSize") if "minSize" in raw else None
        high = _size(raw["maxSize"], where, "maxSize") if "maxSize" in raw else None
        effective_low = low if low is not None else DEFAULT_MIN_SIZE
        if high is not None and high < effective_low:
            raise InputError(
                f"{where}.maxSize: expected an integer >= minSize ({effective_low}), got {high}"
            )
        out[name] = Bounds(low, high, source, where, _price(raw.get("price"), where))
    return out


def _price(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}.price: expected a non-negative number (price per node-hour), got {value!r}")
    return float(value)


def load_bounds(path: str) -> dict[str, Bounds]:
    """Read a `--node-group-bounds` file."""
    try:
        doc = read_yaml_file(
            path, f"--node-group-bounds {path!r}", f"YAML ({BOUNDS_FILE_FORM})",
            max_bytes=MAX_CONFIG_FILE_BYTES,
        )
    except YamlFileError as exc:
        raise InputError(str(exc)) from None
    return parse_bounds_doc(doc, path)


def bounds_from(nodes_flags: Sequence[str], bounds_file: str) -> dict[str, Bounds]:
    """The bounds of the command line: the file's, then `--nodes` (which wins)."""
    out = load_bounds(bounds_file) if bounds_file else {}
    for name, given in parse_nodes_flags(nodes_flags).items():
        # The sizes of --nodes win; the file's price stays.
        price = out[name].price if name in out else None
        out[name] = dataclasses.replace(given, price=price)
    return out


# --------------------------------------------------------------------------- output


def render(inference: Inference) -> str:
    """The inferred groups and the nodes left out, as tables."""
    lines = ["Node groups inferred from the snapshot (no --cloud-config)"]
    if inference.groups:
        rows = [
            (
                g.name,
                g.inferred_from,
                str(len(g.nodes)),
                str(g.min_size) + (" (assumed)" if "minSize" in g.assumed else ""),
                str(g.max_size) + (" (assumed)" if "maxSize" in g.assumed else ""),
                g.bounds_from,
            )
            for g in inference.groups
        ]
        lines.append(
            render_table(("NODE GROUP", "INFERRED FROM", "NODES", "MIN", "MAX", "BOUNDS FROM"), rows)
        )
        if any(g.assumed for g in inference.groups):
            lines.append(
                f"(assumed: min {DEFAULT_MIN_SIZE}, max {DEFAULT_MAX_SIZE} as Cluster Autoscaler's "
                "label-based discovery; set them with --nodes=<min>:<max>:<group> or "
                "--node-group-bounds FILE)"
            )
    else:
        lines.append("(none)")
    if inference.not_inferred:
        lines += ["", "Nodes in no node group"]
        lines.append(
            render_table(("NODE", "REASON"), [(n.name, n.reason) for n in inference.not_inferred])
        )
    return "\n".join(lines)

"""The `sim` provider's cloud-config: node groups declared in YAML.

```yaml
nodeGroups:
  - name: general
    minSize: 1
    maxSize: 10
    price: 0.192            # per node-hour, optional
    provisionDelay: 60s     # how long a new node takes to become ready (default 60s)
    nodeSelector:           # optional: existing nodes with all these labels belong here
      eks.amazonaws.com/nodegroup: general
    template:               # a Node object: labels, taints, capacity, allocatable
                            # (optional with a nodeSelector: new nodes copy an adopted one)
      metadata:
        labels: {topology.kubernetes.io/zone: zone-a}
      spec:
        taints: [{key: dedicated, value: batch, effect: NoSchedule}]
      status:
        capacity: {cpu: "4", memory: 16Gi, pods: "110"}
        allocatable: {cpu: 3920m, memory: 15Gi, pods: "110"}
    resourceSlices:         # optional: the DRA devices each new node has (node-local
      - apiVersion: resource.k8s.io/v1    # ResourceSlices, as kubectl prints them)
        kind: ResourceSlice
        metadata: {name: gpus}
        spec:
          driver: gpu.example.com
          pool: {name: gpus, generation: 1, resourceSliceCount: 1}
          devices: [{name: gpu-0, attributes: {model: {string: a100}}}]
```

Errors name the group and the field (`nodeGroups[1] (general): maxSize: expected ...`).

A node belongs to a group through the `clusterscaler.io/node-group` label (which nodes the
provider creates carry), else through a `sim://<group>/...` provider ID, else through the
`nodeSelector` of a group: that is how a snapshot of a real cluster, whose nodes carry their
cloud's labels (`eks.amazonaws.com/nodegroup`, `cloud.google.com/gke-nodepool`,
`kubernetes.azure.com/agentpool`, ...), is autoscaled unmodified. The selector's labels are
added to the template, so new nodes look like the adopted ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from clusterscaler.api import (
    DURATION_FORM,
    HOSTNAME_LABEL,
    MAX_CONFIG_FILE_BYTES,
    ConfigurationError,
    ModelError,
    Node,
    ResourceSlice,
    YamlFileError,
    describe_value,
    parse_duration,
    parse_node,
    parse_template_slice,
    read_yaml_file,
)

NODE_GROUP_LABEL = "clusterscaler.io/node-group"
DEFAULT_PROVISION_DELAY = timedelta(seconds=60)
_GROUP_KEYS = frozenset(
    {"name", "minSize", "maxSize", "price", "template", "provisionDelay", "nodeSelector",
     "resourceSlices"}
)
_SELECTOR_FORM = (
    "a non-empty map of node label to value, such as "
    "{eks.amazonaws.com/nodegroup: general}"
)
# Kubernetes label values: at most 63 characters of [A-Za-z0-9-_.], alphanumeric at both ends.
_NAME_FORM = "a non-empty name of letters, digits, '-', '_' or '.' (at most 63 characters)"


@dataclass(frozen=True, slots=True)
class NodeGroupSpec:
    """One node group of the cloud-config."""

    name: str
    min_size: int
    max_size: int
    # None only with a nodeSelector: new nodes then copy one of the group's nodes.
    template: Node | None
    price: float | None = None
    provision_delay: timedelta = DEFAULT_PROVISION_DELAY
    # Labels (all of them, with these values) by which existing nodes belong to the group.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # The DRA devices of each new node: the template's ResourceSlices (scale from zero).
    resource_slices: tuple[ResourceSlice, ...] = ()

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with `labels` matches the group's `nodeSelector` (never without
        one)."""
        if not self.node_selector:
            return False
        return all(labels.get(k) == v for k, v in self.node_selector.items())


@dataclass(frozen=True, slots=True)
class SimCloudConfig:
    """The parsed cloud-config: node groups in declaration order."""

    node_groups: tuple[NodeGroupSpec, ...]
    # Where it came from (the file, or the scenario embedding it), as errors found later,
    # when nodes are listed, name it.
    source: str = "cloud-config"

    def group(self, name: str) -> NodeGroupSpec | None:
        for spec in self.node_groups:
            if spec.name == name:
                return spec
        return None


# A value quoted in an error, in a line (a 5,000-character string or a list nested 500 deep).
_shown = describe_value


def _clip(text: str, limit: int = 120) -> str:
    """A field name from the file, cut to a line; quoted when blank or holding a line
    break, so that it is seen and the error stays one line."""
    if not text.strip() or not text.isprintable():
        return describe_value(text)
    return text if len(text) <= limit else f"{text[:80]}... ({len(text)} characters)"


def _valid_name(name: object) -> bool:
    if not isinstance(name, str) or not name or len(name) > 63:
        return False
    if not (name[0].isalnum() and name[-1].isalnum()):
        return False
    return all(c.isalnum() or c in "-_." for c in name)


def _int_field(value: Any, where: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{where}: {field}: expected a non-negative integer, got {_shown(value)}")
    return value


def _parse_selector(raw: Any, where: str, name: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigurationError(f"{where}: nodeSelector: expected {_SELECTOR_FORM}, got {_shown(raw)}")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigurationError(
                f"{where}: nodeSelector: expected label names as keys, got {_shown(key)}"
            )
        if not isinstance(value, str):
            # YAML reads `true`, `1` or `null` as other types; a label value is a string.
            raise ConfigurationError(
                f"{where}: nodeSelector.{key}: expected a label value as a string "
                f"(quote it), got {_shown(value)}"
            )
        if key == HOSTNAME_LABEL:
            raise ConfigurationError(
                f"{where}: nodeSelector.{key}: expected a label the group's nodes share, "
                f"not one naming a single node"
            )
        if key == NODE_GROUP_LABEL and value != name:
            raise ConfigurationError(
                f"{where}: nodeSelector.{key}: expected {_shown(name)} (the group's name), "
                f"got {_shown(value)}"
            )
        out[key] = value
    return out


def _parse_template(
    raw: Any, where: str, name: str, selector: Mapping[str, str] | None = None
) -> Node:
    if not isinstance(raw, Mapping):
        raise ConfigurationError(
            f"{where}: template: expected a Node object with metadata.labels, spec.taints "
            f"and status.capacity, got {_shown(raw)}"
        )
    doc: dict[str, Any] = dict(raw)
    meta = doc.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise ConfigurationError(f"{where}: template.metadata: expected an object, got {_shown(meta)}")
    # Templates describe nodes that do not exist yet: they have no name of their own.
    doc["metadata"] = {**meta, "name": f"template-{name}"}
    status = doc.get("status")
    if not isinstance(status, Mapping) or not status.get("capacity"):
        raise ConfigurationError(
            f"{where}: template.status.capacity: expected a resource list such as "
            f"{{cpu: '4', memory: 16Gi, pods: '110'}}, got {_shown(None if not isinstance(status, Mapping) else status.get('capacity'))}"
        )
    try:
        node = parse_node(doc)
    except ModelError as exc:
        raise ConfigurationError(f"{where}: template.{_clip(exc.field, 300)}: expected {exc.expected}") from None
    capacity = node.capacity
    if capacity.cpu <= 0 or capacity.memory <= 0:
        raise ConfigurationError(
            f"{where}: template.status.capacity: expected positive cpu and memory, "
            f"got {_shown(capacity.to_k8s())}"
        )
    if not capacity.pods:
        # A kubelet's default --max-pods.
        capacity = capacity.with_(pods=110)
    allocatable = node.allocatable if node.allocatable.pods else node.allocatable.with_(pods=capacity.pods)
    if not allocatable.fits(capacity):
        raise ConfigurationError(
            f"{where}: template.status.allocatable: expected at most the capacity "
            f"{_shown(capacity.to_k8s())}, got {_shown(allocatable.to_k8s())}"
        )
    labels = dict(node.labels)
    group_label = labels.get(NODE_GROUP_LABEL)
    if group_label is not None and group_label != name:
        raise ConfigurationError(
            f"{where}: template.metadata.labels.{NODE_GROUP_LABEL}: expected {_shown(name)} "
            f"(the group's name) or no value, got {_shown(group_label)}"
        )
    # New nodes carry the labels that make existing nodes members, so that pods selecting
    # them (a nodeSelector on the node pool label, say) fit the group's new nodes too.
    for key, value in (selector or {}).items():
        have = labels.get(key)
        if have is not None and have != value:
            raise ConfigurationError(
                f"{where}: template.metadata.labels.{key}: expected {_shown(value)} (the group's "
                f"nodeSelector) or no value, got {_shown(have)}"
            )
        labels[key] = value
    labels[NODE_GROUP_LABEL] = name
    labels.setdefault("kubernetes.io/os", "linux")
    labels.setdefault("kubernetes.io/arch", "amd64")
    labels.pop(HOSTNAME_LABEL, None)
    return node.with_(labels=labels, capacity=capacity, allocatable=allocatable, ready=True)


def _parse_group(raw: Any, index: int) -> NodeGroupSpec:
    where = f"nodeGroups[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigurationError(
            f"{where}: expected an object with name, minSize, maxSize and template, got {_shown(raw)}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not _valid_name(name):
        raise ConfigurationError(f"{where}: name: expected {_NAME_FORM}, got {_shown(name)}")
    where = f"{where} ({name})"
    unknown = sorted(str(k) for k in raw if k not in _GROUP_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where}: {_clip(unknown[0])}: unknown field; expected one of "
            f"{', '.join(sorted(_GROUP_KEYS))}"
        )
    for required in ("minSize", "maxSize"):
        if required not in raw:
            raise ConfigurationError(f"{where}: {required}: required field is missing")
    if "template" not in raw and "nodeSelector" not in raw:
        raise ConfigurationError(
            f"{where}: template: required field is missing (or a nodeSelector, to adopt "
            f"existing nodes and copy new ones from them)"
        )
    min_size = _int_field(raw["minSize"], where, "minSize")
    max_size = _int_field(raw["maxSize"], where, "maxSize")
    if max_size < min_size:
        raise ConfigurationError(
            f"{where}: maxSize: expected an integer >= minSize ({min_size}), got {max_size}"
        )
    price_raw = raw.get("price")
    price: float | None = None
    if price_raw is not None:
        if isinstance(price_raw, bool) or not isinstance(price_raw, int | float):
            raise ConfigurationError(
                f"{where}: price: expected a non-negative number (price per node-hour), got {_shown(price_raw)}"
            )
        # An integer beyond float's range is no price either.
        price = float(price_raw) if abs(price_raw) < 1e300 else math.inf
        if price < 0 or not math.isfinite(price):
            raise ConfigurationError(
                f"{where}: price: expected a non-negative number (price per node-hour), got {_shown(price_raw)}"
            )
    delay = DEFAULT_PROVISION_DELAY
    delay_raw = raw.get("provisionDelay")
    if delay_raw is not None:
        bad = ConfigurationError(
            f"{where}: provisionDelay: expected {DURATION_FORM}, got {_shown(delay_raw)}"
        )
        if not isinstance(delay_raw, str):
            raise bad
        try:
            delay = parse_duration(delay_raw)
        except ValueError:
            raise bad from None
    selector: dict[str, str] = {}
    if "nodeSelector" in raw:
        selector = _parse_selector(raw["nodeSelector"], where, name)
    template: Node | None = None
    if "template" in raw:
        template = _parse_template(raw["template"], where, name, selector)
    return NodeGroupSpec(
        name=name,
        min_size=min_size,
        max_size=max_size,
        template=template,
        price=price,
        provision_delay=delay,
        node_selector=selector,
        resource_slices=_parse_slices(raw.get("resourceSlices"), where),
    )


def _parse_slices(raw: Any, where: str) -> tuple[ResourceSlice, ...]:
    """The group's `resourceSlices`: node-local ResourceSlices of resource.k8s.io."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigurationError(
            f"{where}: resourceSlices: expected a list of ResourceSlice objects, got {_shown(raw)}"
        )
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ConfigurationError(
                f"{where}: resourceSlices[{i}]: expected a ResourceSlice object, got {_shown(item)}"
            )
        try:
            out.append(parse_template_slice(item))
        except ModelError as exc:
            raise ConfigurationError(f"{where}: resourceSlices[{i}]: {exc}") from None
    return tuple(out)


def parse_cloud_config(doc: Any, source: str = "cloud-config") -> SimCloudConfig:
    """Parse a loaded YAML document. Raises `ConfigurationError` naming group and field."""
    if not isinstance(doc, Mapping):
        raise ConfigurationError(
            f"{source}: expected an object with a nodeGroups list, got {type(doc).__name__}"
        )
    unknown = sorted(str(k) for k in doc if k != "nodeGroups")
    if unknown:
        raise ConfigurationError(f"{source}: {_clip(unknown[0])}: unknown field; expected nodeGroups")
    groups_raw = doc.get("nodeGroups")
    if not isinstance(groups_raw, list):
        raise ConfigurationError(
            f"{source}: nodeGroups: expected a list of node groups, got {_shown(groups_raw)}"
        )
    groups: list[NodeGroupSpec] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(groups_raw):
        try:
            spec = _parse_group(raw, i)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None
        if spec.name in seen:
            raise ConfigurationError(
                f"{source}: nodeGroups[{i}] ({spec.name}): name: expected a unique name, "
                f"already used by nodeGroups[{seen[spec.name]}]"
            )
        if spec.node_selector:
            _check_selector_overlap(spec, i, groups, source)
        seen[spec.name] = i
        groups.append(spec)
    return SimCloudConfig(tuple(groups), source)


def _check_selector_overlap(
    spec: NodeGroupSpec, index: int, earlier: list[NodeGroupSpec], source: str
) -> None:
    """Refuse selectors where one contains the other's labels: every node the longer one
    matches would then match both groups. Overlaps that depend on the
    nodes (two selectors on different labels) are found when the nodes are listed."""
    mine = set(spec.node_selector.items())
    for j, other in enumerate(earlier):
        theirs = set(other.node_selector.items())
        if not theirs or not (theirs <= mine or mine <= theirs):
            continue
        wider = spec.node_selector if theirs <= mine else other.node_selector
        raise ConfigurationError(
            f"{source}: nodeGroups[{index}] ({spec.name}): nodeSelector: expected a selector "
            f"no node shares with another group, got {_selector_text(spec.node_selector)}: "
            f"every node labelled {_selector_text(wider)} would match both it and "
            f"nodeGroups[{j}] ({other.name})'s {_selector_text(other.node_selector)}"
        )


def _selector_text(selector: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(selector.items())) + "}"


def load_cloud_config(path: str | Path) -> SimCloudConfig:
    """Read and parse a cloud-config file."""
    p = Path(path)
    try:
        doc = read_yaml_file(
            p, f"--cloud-config {str(p)!r}", "YAML declaring nodeGroups",
            max_bytes=MAX_CONFIG_FILE_BYTES,
        )
    except YamlFileError as exc:
        raise ConfigurationError(str(exc)) from None
    return parse_cloud_config(doc, source=str(p))

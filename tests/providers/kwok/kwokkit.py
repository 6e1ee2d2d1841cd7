"""Samples and fakes of the kwok provider tests: upstream's chart config and test templates,
template builders, and an in-memory `NodeStore` whose cache lags the writes on purpose."""

from __future__ import annotations

import copy
from typing import Any

from clusterscaler_kwok.config import KwokConfig
from clusterscaler_kwok.provider import KwokCloudProvider
from clusterscaler_kwok.templates import build_groups

Raw = dict[str, Any]
WHERE = "ConfigMap kube-system/kwok-provider-config, key config"
GROUP_LABEL = "kwok-nodegroup"
KWOK = "kwok.x-k8s.io/node"
NG_NAME = "cluster-autoscaler.kwok.nodegroup/name"
MIN, MAX, DESIRED = (f"cluster-autoscaler.kwok.nodegroup/{k}-count" for k in ("min", "max", "desired"))

# The `config` key of the upstream chart's kwok-provider-config ConfigMap (§7a), verbatim.
CHART_CONFIG = """\
# if you see '\\n' everywhere, remove all the trailing spaces
apiVersion: v1alpha1
readNodesFrom: configmap # possible values: [cluster,configmap]
nodegroups:
  # to specify how to group nodes into a nodegroup
  # e.g., you want to treat nodes with same instance type as a nodegroup
  # node1: m5.xlarge
  # node2: c5.xlarge
  # node3: m5.xlarge
  # nodegroup1: [node1,node3]
  # nodegroup2: [node2]
  fromNodeLabelKey: "kwok-nodegroup"
  # you can either specify fromNodeLabelKey OR fromNodeAnnotation
  # (both are not allowed)
  # fromNodeAnnotation: "eks.amazonaws.com/nodegroup"
nodes:
  # gpuConfig:
  #   # to tell kwok provider what label should be considered as GPU label
  #   gpuLabelKey: "k8s.amazonaws.com/accelerator"
  #   availableGPUTypes:
  #     "nvidia-tesla-k80": {}
  #     "nvidia-tesla-p100": {}
configmap:
  name: kwok-provider-templates
kwok: {} # default: fetch latest release of kwok from github and install it
# # you can also manually specify which kwok release you want to install
# # for example:
# kwok:
#   release: v0.3.0
# # you can also disable installing kwok in CA code (and install your own kwok release)
# kwok:
#   install: false (true if not specified)
"""

# `testTemplates` of upstream's kwok_constants.go (§7b), verbatim.
TEST_TEMPLATES = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    annotations: {}
    labels:
      beta.kubernetes.io/arch: amd64
      beta.kubernetes.io/os: linux
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: kind-worker
      kwok-nodegroup: kind-worker
      kubernetes.io/os: linux
      k8s.amazonaws.com/accelerator: "nvidia-tesla-k80"
    name: kind-worker
  spec:
    podCIDR: 10.244.2.0/24
    podCIDRs:
    - 10.244.2.0/24
    providerID: kind://docker/kind/kind-worker
  status:
    addresses:
    - address: 172.18.0.3
      type: InternalIP
    - address: kind-worker
      type: Hostname
    allocatable:
      cpu: "12"
      ephemeral-storage: 959786032Ki
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 32781516Ki
      pods: "110"
    capacity:
      cpu: "12"
      ephemeral-storage: 959786032Ki
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 32781516Ki
      pods: "110"
kind: List
metadata:
  resourceVersion: ""
"""


def make_config(**kw: Any) -> KwokConfig:
    """The chart's grouping, by the `kwok-nodegroup` label, unless `kw` says otherwise."""
    return KwokConfig(**{"read_nodes_from": "cluster", "group_by": "label",
                         "group_key": GROUP_LABEL, **kw})


def template(name: str, group: str | None = None, *, annotations: dict[str, Any] | None = None,
             labels: dict[str, str] | None = None, **extra: Any) -> Raw:
    """A template Node, in the group `group` by the `kwok-nodegroup` label (None: no label)."""
    meta: Raw = {"name": name, "labels": {**({GROUP_LABEL: group} if group else {}),
                                          **(labels or {})}}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": {**meta, **extra},
            "spec": {"providerID": f"kind://docker/kind/{name}"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def kwok_node(name: str, group: str, *, fake: bool = True, provider_id: str | None = None) -> Raw:
    """A node already in the cluster, as the provider would have created it."""
    annotations = {NG_NAME: group, **({KWOK: "fake"} if fake else {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": annotations, "labels": {}},
            "spec": {"providerID": provider_id or f"kwok:{name}"}}


class FakeNodeStore:
    """The API server's nodes (`live`) and the watch cache the provider reads (`watched`),
    which catches up with the writes only on `sync()`."""

    def __init__(self, *nodes: Raw) -> None:
        self.live: dict[str, Raw] = {n["metadata"]["name"]: n for n in nodes}
        self.watched = copy.deepcopy(self.live)
        self.created: list[Raw] = []
        self.deleted: list[str] = []
        self.closed = False

    def nodes(self) -> list[Raw]:
        return list(self.watched.values())

    def create(self, node: Raw) -> None:
        name = node["metadata"]["name"]
        assert name not in self.live, f"node {name} exists"
        self.live[name] = copy.deepcopy(node)
        self.created.append(copy.deepcopy(node))

    def delete(self, name: str) -> None:
        self.live.pop(name, None)
        self.deleted.append(name)

    def close(self) -> None:
        self.closed = True

    def sync(self) -> None:
        self.watched = copy.deepcopy(self.live)


def make_provider(*templates: Raw, nodes: tuple[Raw, ...] = (),
                  config: KwokConfig | None = None) -> tuple[KwokCloudProvider, FakeNodeStore]:
    """A provider over `templates`, refreshed once over a store holding `nodes`."""
    config = config or make_config()
    groups, problems = build_groups(templates, config)
    store = FakeNodeStore(*nodes)
    provider = KwokCloudProvider(config, groups, store, problems)
    provider.refresh()
    return provider, store

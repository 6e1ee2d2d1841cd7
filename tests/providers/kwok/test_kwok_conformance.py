"""The kwok provider keeps the CloudProvider contract, over the in-memory node store: a
group is a template Node with its min and max in annotations, its instances the fake
nodes it created. kwok creates nodes at once, so no capacity stays requested."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.api import CloudProvider, Instance, Node, NodeGroup, parse_node
from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud
from kwokkit import MAX, MIN, FakeNodeStore, kwok_node, make_provider, template


class KwokCloud(ConformanceCloud):
    def __init__(self) -> None:
        self._templates: list[dict[str, Any]] = []
        self._nodes: list[dict[str, Any]] = []
        self._store: FakeNodeStore | None = None

    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        annotations = {MIN: str(min_size), MAX: str(max_size)}
        raw = template(f"{name}-template", name, annotations=annotations)
        raw["status"]["capacity"] = dict(raw["status"]["allocatable"])
        self._templates.append(raw)
        self._nodes.extend(kwok_node(f"{name}-{i}", name) for i in range(size))

    def build(self) -> CloudProvider:
        provider, self._store = make_provider(*self._templates, nodes=tuple(self._nodes))
        return provider

    def group_id(self, name: str) -> str:
        return name

    def refresh(self, provider: CloudProvider) -> None:
        # The watch catches up with the provider's writes before the next loop.
        assert self._store is not None
        self._store.sync()
        provider.refresh()

    def node(self, group: NodeGroup, instance: Instance) -> Node:
        assert self._store is not None
        return parse_node(self._store.live[instance.id.removeprefix("kwok:")])


class TestKwokConformance(CloudProviderConformance):
    @pytest.fixture
    def cloud(self) -> KwokCloud:
        return KwokCloud()

"""KwokCloudProvider and KwokNodeGroup over an in-memory NodeStore whose cache lags the
writes: the nodes a scale-up creates, target sizes while the watch catches up, refused
deletions, node-to-group mapping, the template NodeInfo and cleanup."""

from __future__ import annotations

import re
from typing import Any

import pytest
from clusterscaler.api import CloudProviderError, InstanceState, Node, parse_node
from clusterscaler_kwok.config import GpuConfig
from clusterscaler_kwok.templates import PROVIDER_TAINT, parse_templates
from kwokkit import (
    GROUP_LABEL,
    KWOK,
    MAX,
    MIN,
    NG_NAME,
    TEST_TEMPLATES,
    FakeNodeStore,
    kwok_node,
    make_config,
    make_provider,
    template,
)


def by_name(store: FakeNodeStore, name: str) -> Node:
    return parse_node(store.live[name])


# --------------------------------------------------------------------------- increase_size


def test_increase_size_creates_kwok_nodes_from_the_template() -> None:
    provider, store = make_provider(template("kind-worker", "pool", labels={
        "kubernetes.io/hostname": "kind-worker", "zone": "a"}))
    (group,) = provider.node_groups()

    group.increase_size(3)

    assert len(store.created) == 3
    assert len({n["metadata"]["name"] for n in store.created}) == 3
    for raw in store.created:
        name, meta = raw["metadata"]["name"], raw["metadata"]
        assert re.fullmatch(r"pool-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
        assert meta["annotations"] == {
            KWOK: "fake", NG_NAME: "pool",
            "metrics.k8s.io/resource-metrics-path": f"/metrics/nodes/{name}/metrics/resource",
        }
        assert meta["labels"] == {GROUP_LABEL: "pool", "zone": "a",
                                  "kubernetes.io/hostname": name}
        assert raw["spec"]["providerID"] == f"kwok:{name}"
        assert PROVIDER_TAINT in raw["spec"]["taints"]
        assert raw["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    # The group's template is not modified by the scale-up.
    assert group.template.node["metadata"]["name"] == "kwok-fake-kind-worker"


def test_target_size_counts_created_nodes_before_the_cache_shows_them_and_once_after() -> None:
    provider, store = make_provider(template("t", "pool"), nodes=(kwok_node("pool-old", "pool"),))
    (group,) = provider.node_groups()
    assert group.target_size() == 1

    group.increase_size(2)
    assert group.target_size() == 3
    provider.refresh()  # the cache has not seen the creates yet
    assert group.target_size() == 3
    store.sync()
    provider.refresh()
    assert group.target_size() == 3
    assert [i.id for i in group.nodes()] == sorted(f"kwok:{n}" for n in store.live)
    assert {i.state for i in group.nodes()} == {InstanceState.RUNNING}


@pytest.mark.parametrize(
    ("existing", "delta", "message"),
    [
        (2, 2, r"size increase too large, 2 \+ 2 = 4 > max 3"),
        (0, 4, r"size increase too large, 0 \+ 4 = 4 > max 3"),
        (0, 0, "expected a positive delta, got 0"),
        (1, -1, "expected a positive delta, got -1"),
    ],
    ids=["beyond-max", "beyond-max-from-zero", "zero", "negative"],
)
def test_refused_increase_creates_nothing(existing: int, delta: int, message: str) -> None:
    nodes = tuple(kwok_node(f"pool-n{i}", "pool") for i in range(existing))
    provider, store = make_provider(template("t", "pool", annotations={MAX: "3"}), nodes=nodes)
    (group,) = provider.node_groups()
    with pytest.raises(CloudProviderError, match=message):
        group.increase_size(delta)
    assert store.created == []
    assert group.target_size() == existing


# --------------------------------------------------------------------------- delete_nodes


@pytest.mark.parametrize(
    ("min_size", "victims", "error"),
    [
        ("0", ["pool-a", "pool-b"], None),
        ("2", ["pool-a"], None),
        ("3", ["pool-a"], "min size reached"),
        ("2", ["pool-a", "pool-b"], "min size reached"),
        ("0", ["pool-a", "pool-real"], "pool-real is not managed by kwok"),
        ("0", ["pool-real", "pool-a"], "pool-real is not managed by kwok"),
        ("0", ["pool-a", "elsewhere"], "elsewhere is not in this node group"),
    ],
    ids=["deletes", "down-to-min", "at-min", "below-min", "not-fake-last", "not-fake-first",
         "other-group"],
)
def test_delete_nodes(min_size: str, victims: list[str], error: str | None) -> None:
    nodes = (kwok_node("pool-a", "pool"), kwok_node("pool-b", "pool"),
             kwok_node("pool-real", "pool", fake=False), kwok_node("elsewhere", "other"))
    provider, store = make_provider(template("t", "pool", annotations={MIN: min_size}),
                                    template("u", "other"), nodes=nodes)
    group = next(g for g in provider.node_groups() if g.id == "pool")
    assert group.target_size() == 3

    if error is None:
        group.delete_nodes([by_name(store, v) for v in victims])
        assert store.deleted == victims
        assert group.target_size() == 3 - len(victims)
    else:
        with pytest.raises(CloudProviderError, match=error):
            group.delete_nodes([by_name(store, v) for v in victims])
        assert store.deleted == [], "no node is deleted"
        assert group.target_size() == 3


def test_target_drops_at_once_and_stays_down_while_the_cache_lags() -> None:
    provider, store = make_provider(template("t", "pool"),
                                    nodes=(kwok_node("pool-a", "pool"), kwok_node("pool-b", "pool")))
    (group,) = provider.node_groups()
    group.delete_nodes([by_name(store, "pool-a")])
    assert group.target_size() == 1
    provider.refresh()  # the cache still shows pool-a
    assert group.target_size() == 1
    assert [i.id for i in group.nodes()] == ["kwok:pool-b"]
    store.sync()
    provider.refresh()
    assert group.target_size() == 1


def test_node_created_and_deleted_before_the_cache_saw_it_is_gone() -> None:
    provider, store = make_provider(template("t", "pool"))
    (group,) = provider.node_groups()
    group.increase_size(1)
    (name,) = store.live
    group.delete_nodes([by_name(store, name)])
    assert group.target_size() == 0
    store.sync()  # the watch delivered both events: the node never shows up
    provider.refresh()
    assert group.target_size() == 0
    assert group.nodes() == []


# --------------------------------------------------------------------------- provider


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (kwok_node("pool-abcde", "pool"), "pool"),
        ({**template("x", "other"), "spec": {"providerID": "kwok:x"}}, "other"),
        ({**template("x", "other"), "spec": {"providerID": "kwok-fake-x"}}, "other"),
        (kwok_node("pool-abcde", "pool", provider_id="kind://docker/kind/x"), None),
        ({**template("x", "pool"), "spec": {}}, None),
        (kwok_node("gone-abcde", "gone"), None),
    ],
    ids=["by-annotation", "by-label", "kwok-prefix-without-colon", "not-kwok-provider-id",
         "no-provider-id", "unknown-group"],
)
def test_node_group_for_node(raw: dict[str, Any], expected: str | None) -> None:
    provider, _ = make_provider(template("t", "pool"), template("u", "other"))
    group = provider.node_group_for_node(parse_node(raw))
    assert (group.id if group else None) == expected


def test_template_node_info_is_the_prepared_template() -> None:
    provider, _ = make_provider(*parse_templates(TEST_TEMPLATES, "test"))
    (group,) = provider.node_groups()
    info = group.template_node_info()
    assert info.node.name == "kwok-fake-kind-worker"
    assert info.node.provider_id == "kwok:kwok-fake-kind-worker"
    assert info.node.annotations[NG_NAME] == "kind-worker"
    alloc = info.node.allocatable
    assert (alloc.cpu, alloc.memory, alloc.pods) == (12_000, 32781516 * 1024, 110)
    assert [(t.key, t.value, t.effect) for t in info.node.taints] == [
        ("kwok-provider", "true", "NoSchedule")]
    assert group.debug() == "kind-worker (0:200)"


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [(None, ""),
     (("k8s.amazonaws.com/accelerator", ("nvidia-tesla-k80",)), "k8s.amazonaws.com/accelerator")],
    ids=["no-gpu-config", "gpu-config"],
)
def test_gpu_label(gpu: tuple[str, tuple[str, ...]] | None, expected: str) -> None:
    config = make_config(gpu=GpuConfig(*gpu) if gpu else None)
    provider, _ = make_provider(template("t", "pool"), config=config)
    assert provider.gpu_label() == expected


def test_problems_are_the_template_problems() -> None:
    provider, _ = make_provider(template("t", "pool"),
                                template("bad", "broken", annotations={MIN: "x"}))
    assert [g.id for g in provider.node_groups()] == ["pool"]
    assert [(p.node_group, p.reason) for p in provider.problems()] == [("broken", "InvalidTemplate")]


def test_cleanup_deletes_only_the_fake_nodes_of_known_groups_and_closes_the_store() -> None:
    real = {**template("real", "pool"), "spec": {"providerID": "aws:///us-east-1a/i-1"}}
    provider, store = make_provider(template("t", "pool"), nodes=(
        kwok_node("pool-a", "pool"), kwok_node("pool-b", "pool"),
        kwok_node("pool-unmanaged", "pool", fake=False),
        kwok_node("stranger-a", "stranger"), real))
    provider.cleanup()
    assert sorted(store.deleted) == ["pool-a", "pool-b"]
    assert store.closed


def test_cleanup_closes_the_store_when_the_cache_fails() -> None:
    provider, store = make_provider(template("t", "pool"), nodes=(kwok_node("pool-a", "pool"),))

    def stale() -> list[dict[str, Any]]:
        raise CloudProviderError("the node cache has not synced yet")

    store.nodes = stale  # type: ignore[method-assign]
    provider.cleanup()
    assert store.deleted == [] and store.closed


def test_cleanup_deletes_nodes_created_before_the_cache_showed_them() -> None:
    provider, store = make_provider(template("t", "pool"))
    (group,) = provider.node_groups()
    group.increase_size(2)
    provider.cleanup()
    assert sorted(store.deleted) == sorted(n["metadata"]["name"] for n in store.created)

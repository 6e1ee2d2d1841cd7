"""The pods-by-node index of the in-memory cluster and its thread safety."""

from __future__ import annotations

import threading

from clusterscaler.framework.inmemorycluster import InMemoryCluster, PodTable
from clusterscaler.model import ClusterObjects, OwnerRef
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.simulatedcluster import SimulatedCluster
from clusterscaler.simulator.builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

NODE_NAMES = ["", "n1", "n2", "n3"]
POD_NAMES = [f"p{i}" for i in range(6)]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(POD_NAMES), st.sampled_from(NODE_NAMES)),
        st.tuples(st.just("del"), st.sampled_from(POD_NAMES), st.just("")),
        st.tuples(st.just("pop"), st.sampled_from(POD_NAMES), st.just("")),
        st.tuples(st.just("setdefault"), st.sampled_from(POD_NAMES), st.sampled_from(NODE_NAMES)),
        st.tuples(st.just("update"), st.sampled_from(POD_NAMES), st.sampled_from(NODE_NAMES)),
        st.tuples(st.just("popitem"), st.just(""), st.just("")),
        st.tuples(st.just("clear"), st.just(""), st.just("")),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_index_lists_the_same_pods_in_the_same_order_as_a_scan(
    ops: list[tuple[str, str, str]],
) -> None:
    table = PodTable()
    for op, name, node in ops:
        key = f"default/{name}"
        pod = make_pod(name, node_name=node)
        if op == "set":
            table[key] = pod
        elif op == "del" and key in table:
            del table[key]
        elif op == "pop":
            table.pop(key, None)
        elif op == "setdefault":
            table.setdefault(key, pod)
        elif op == "update":
            table.update({key: pod})
        elif op == "popitem" and table:
            table.popitem()
        elif op == "clear":
            table.clear()
        for n in NODE_NAMES[1:]:
            assert table.on_node(n) == [p for p in table.values() if p.node_name == n]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(POD_NAMES), st.sampled_from(NODE_NAMES)), max_size=20))
def test_a_table_filled_at_once_is_the_table_filled_pod_by_pod(
    pods: list[tuple[str, str]],
) -> None:
    # Names given twice included: the last pod of a name wins, in its first place.
    given_pods = [make_pod(name, node_name=node) for name, node in pods]
    filled = PodTable(given_pods)
    one_by_one = PodTable()
    for pod in given_pods:
        one_by_one[pod.key] = pod
    assert list(filled.items()) == list(one_by_one.items())
    for n in NODE_NAMES[1:]:
        assert filled.on_node(n) == one_by_one.on_node(n)
        assert filled.on_node(n) == [p for p in filled.values() if p.node_name == n]
    extra = make_pod("late", node_name="n1")
    filled[extra.key] = extra
    one_by_one[extra.key] = extra
    assert filled.on_node("n1") == one_by_one.on_node("n1")


def test_remove_node_deletes_only_its_pods_and_returns_them() -> None:
    cluster = InMemoryCluster(
        [make_node("n1"), make_node("n2")],
        [
            make_pod("a", node_name="n1"),
            make_pod("b", node_name="n2"),
            make_pod("c"),
            make_pod("d", node_name="n1"),
        ],
    )
    cluster.bind("default/c", "n1")
    removed = cluster.remove_node("n1")
    assert [p.key for p in removed] == ["default/a", "default/c", "default/d"]
    assert sorted(cluster.pods) == ["default/b"]
    assert "n1" not in cluster.nodes
    assert cluster.pods_on_node("n1") == []
    assert [p.key for p in cluster.pods_on_node("n2")] == ["default/b"]


def test_an_evicted_pod_leaves_the_index() -> None:
    cluster = InMemoryCluster([make_node("n1")], [make_pod("a", node_name="n1")])
    cluster.evict(cluster.pods["default/a"], None)
    assert cluster.pods_on_node("n1") == []
    assert cluster.remove_node("n1") == []


def test_deleting_nodes_while_other_threads_evict_keeps_every_pod_accounted_for() -> None:
    owner = OwnerRef(kind="ReplicaSet", name="web", uid="rs-web", controller=True)
    nodes = [make_node(f"n{i}") for i in range(20)]
    pods = [
        make_pod(f"w{i}-{j}", node_name=f"n{i}", owner=owner) for i in range(20) for j in range(30)
    ]
    cluster = SimulatedCluster(ClusterObjects(nodes=nodes, pods=pods), VirtualClock())
    deleted = {f"n{i}" for i in range(1, 10)}
    victims = [p for p in pods if p.node_name not in deleted]
    errors: list[BaseException] = []

    def evict_all(chunk: list) -> None:
        try:
            for pod in chunk:
                cluster.evict(pod, None)
        except BaseException as e:  # surfaced below, a thread's exception is lost otherwise
            errors.append(e)

    def delete_all() -> None:
        try:
            for name in sorted(deleted):
                cluster.delete_node(name)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=evict_all, args=(victims[k::4],)) for k in range(4)] + [
        threading.Thread(target=delete_all)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert errors == []
    # Every original pod is gone (evicted or deleted with its node) and each was recreated once
    # as a pending pod by its ReplicaSet.
    assert not any(p.key in cluster.pods for p in pods)
    assert len(cluster.pods) == len(pods)
    assert not deleted & set(cluster.nodes)
    assert all(not p.node_name for p in cluster.pods.values())
    for node in cluster.nodes:
        assert cluster.pods_on_node(node) == []

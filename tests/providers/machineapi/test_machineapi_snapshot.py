"""Properties of the node-group view built from listed Machine API objects."""

from __future__ import annotations

from typing import Any

from clusterscaler.model import Node
from clusterscaler_machineapi.apigroups import ApiGroup
from clusterscaler_machineapi.snapshot import Listing, build_snapshot, instance_id
from hypothesis import given, settings
from hypothesis import strategies as st
from machineapi_builders import CAPI, OPENSHIFT, limits, machine, provider_id_for, scalable


def with_uid(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


layouts = st.lists(
    st.tuples(st.booleans(), st.integers(0, 4), st.booleans()),  # autoscaled, machines, registered
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(layouts, st.sampled_from([OPENSHIFT, CAPI]))
def test_every_machine_maps_back_to_exactly_its_autoscaled_set(layout: list[tuple[bool, int, bool]], group: str) -> None:
    api = ApiGroup(group, "v1beta1")
    sets, machines, expected = [], [], {}
    for i, (autoscaled, count, registered) in enumerate(layout):
        ms = with_uid(
            scalable(f"set-{i}", group=group, namespace="ns", replicas=count, annotations=limits(group, 0, 9) if autoscaled else {}),
            f"uid-{i}",
        )
        sets.append(ms)
        for j in range(count):
            name = f"m-{i}-{j}"
            machines.append(
                machine(ms, name, provider_id="default" if registered else None, node_name="default" if registered else None)
            )
            expected[name] = f"MachineSet/ns/set-{i}" if autoscaled else None
    snap = build_snapshot([Listing(api=api, scalable={"MachineSet": sets}, machines=machines)], ())
    assert list(snap.groups) == sorted(f"MachineSet/ns/set-{i}" for i, (autoscaled, _, _) in enumerate(layout) if autoscaled)
    for name, group_id in expected.items():
        raw_machine = snap.machines[(group, f"ns/{name}")]
        by_instance = Node(name=name, provider_id=instance_id(raw_machine))
        by_annotation = Node(name=name, annotations={f"{group}/machine": f"ns/{name}"})
        for node in (by_instance, by_annotation):
            found = snap.machine_for_node(node)
            assert found is not None and found.name == name
            assert snap.group_id_of(found) == group_id
        if group_id is not None:
            ids = [instance_id(m) for m in snap.groups[group_id].machines]
            assert instance_id(raw_machine) in ids
    # Nodes of other clusters never match.
    assert snap.machine_for_node(Node(name="x", provider_id=provider_id_for("elsewhere"))) is None

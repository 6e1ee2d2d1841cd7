"""A Cluster API MachineDeployment that is rolling out is not scaled down.

As upstream's clusterapi provider: while a MachineSet of the deployment other than the
current one (the highest revision) still has replicas, none of its nodes is a scale-down
candidate; the loop says why per node, in the status message and in `explain`, and goes on
with the other groups. Once the old MachineSets are at zero the nodes are removable again.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.commands.explain import explain, render
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.report.status import status_from_result
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler_machineapi.apigroups import ApiGroup
from clusterscaler_machineapi.snapshot import Listing, build_snapshot
from machineapi_builders import CAPI, limits, machine, node, resource_name, scalable

MD = resource_name(CAPI, "MachineDeployment")
MS = resource_name(CAPI, "MachineSet")
M = resource_name(CAPI, "Machine")
MD_ID = "MachineDeployment/team-a/md"
REVISION = "machinedeployment.clusters.x-k8s.io/revision"


def machine_set(md: dict[str, Any], name: str, revision: str | None, replicas: int, status: Any = "same") -> dict[str, Any]:
    obj = scalable(
        name,
        group=CAPI,
        namespace="team-a",
        replicas=replicas,
        annotations={REVISION: revision} if revision is not None else {},
        owner=md,
    )
    obj["status"] = {"replicas": replicas if status == "same" else status}
    return obj


def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the caches did not catch up"
        time.sleep(0.05)


def test_a_rolling_deployment_keeps_its_nodes_until_the_rollout_completes(
    kube: FakeKubeServer, make_provider: Any, api_client: Any
) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    md = kube.create(
        scalable("md", group=CAPI, kind="MachineDeployment", namespace="team-a", replicas=2, annotations=limits(CAPI, 0, 5))
    )
    old = kube.create(machine_set(md, "md-old", "1", 1))
    new = kube.create(machine_set(md, "md-new", "2", 1))
    for ms, name in ((old, "old-0"), (new, "new-0")):
        kube.create(machine(ms, name))
        kube.create(node(name))
    provider = make_provider()
    options = dataclasses.replace(
        AutoscalingOptions(),
        scale_down_delay_after_add=timedelta(0),
        scale_down_unneeded_time=timedelta(minutes=1),
    )
    registry = collect_registry(build_plugin_manager())
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        wait_until(lambda: len(source.snapshot().nodes) == 2)
        loop = Autoscaler.from_registry(
            registry, options=options, provider=provider, source=source, actions=KubeClusterActions(api_client)
        )

        # Rolling out: both empty nodes are kept, every loop, with the group's reason.
        for step in range(3):
            result = loop.run_once(now + timedelta(minutes=2 * step))
            assert result.errors == ()
            assert result.scale_down.deletions == ()
            assert result.scale_down.unneeded == ()
            kept = {u.node: u for u in result.scale_down.unremovable}
            assert set(kept) == {"old-0", "new-0"}
            for u in kept.values():
                assert u.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
                assert f"node group {MD_ID}: scale-down blocked" in u.detail
                assert "MachineSet team-a/md-old" in u.detail
        [group_status] = result.node_groups
        assert "is rolling out" in group_status.scale_down_blocked
        message = status_from_result(result).message
        assert f"{MD_ID}: scale-down blocked: MachineDeployment team-a/md is rolling out" in message
        assert "the current one is MachineSet team-a/md-new (revision 2)" in message
        text = render(explain(result, source.snapshot(), options, result.time, provider))
        assert "Node groups not scaled down now" in text
        assert MD_ID in text and "old MachineSet MachineSet team-a/md-old" in text
        assert kube.get(MD, "md", "team-a")["spec"]["replicas"] == 2  # type: ignore[index]
        assert not [r for r in kube.requests if r.method == "PATCH" and r.resource == "machines"]

        # The rollout completes: the old MachineSet is at zero, its machine and node gone.
        kube.patch(MS, "md-old", {"spec": {"replicas": 0}, "status": {"replicas": 0}}, "team-a")
        kube.delete(M, "old-0", "team-a")
        kube.delete("nodes", "old-0")
        kube.patch(MD, "md", {"spec": {"replicas": 1}}, "team-a")
        wait_until(lambda: [n.name for n in source.snapshot().nodes] == ["new-0"])

        later = now + timedelta(minutes=10)
        first = loop.run_once(later)
        assert first.errors == ()
        assert [g.scale_down_blocked for g in first.node_groups] == [""]
        assert [u.node for u in first.scale_down.unneeded] == ["new-0"]
        assert "scale-down blocked" not in status_from_result(first).message
        result = loop.run_once(later + timedelta(minutes=2))
        assert result.errors == ()
        assert [(d.node, d.node_group, d.ok) for d in result.scale_down.deletions] == [("new-0", MD_ID, True)]
    # Removed as any node is: its Machine marked, then the deployment's replicas lowered.
    assert kube.get(MD, "md", "team-a")["spec"]["replicas"] == 0  # type: ignore[index]
    marked = kube.get(M, "new-0", "team-a")["metadata"]["annotations"]  # type: ignore[index]
    assert f"{CAPI}/delete-machine" in marked


def test_other_groups_still_scale_down_while_a_deployment_rolls_out(kube: FakeKubeServer, make_provider: Any, api_client: Any) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    md = kube.create(
        scalable("md", group=CAPI, kind="MachineDeployment", namespace="team-a", replicas=2, annotations=limits(CAPI, 0, 5))
    )
    old = kube.create(machine_set(md, "md-old", "1", 1))
    new = kube.create(machine_set(md, "md-new", "2", 1))
    plain = kube.create(scalable("plain", group=CAPI, namespace="team-a", replicas=1, annotations=limits(CAPI, 0, 5)))
    for ms, name in ((old, "old-0"), (new, "new-0"), (plain, "plain-0")):
        kube.create(machine(ms, name))
        kube.create(node(name))
    provider = make_provider()
    options = dataclasses.replace(
        AutoscalingOptions(), scale_down_delay_after_add=timedelta(0), scale_down_unneeded_time=timedelta(minutes=1)
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        wait_until(lambda: len(source.snapshot().nodes) == 3)
        loop = Autoscaler.from_registry(
            collect_registry(build_plugin_manager()),
            options=options,
            provider=provider,
            source=source,
            actions=KubeClusterActions(api_client),
        )
        deleted: list[str] = []
        for step in range(3):
            result = loop.run_once(now + timedelta(minutes=2 * step))
            assert result.errors == ()
            deleted += [d.node for d in result.scale_down.deletions if d.ok]
    assert deleted == ["plain-0"]
    assert kube.get(MS, "plain", "team-a")["spec"]["replicas"] == 0  # type: ignore[index]
    assert kube.get(MD, "md", "team-a")["spec"]["replicas"] == 2  # type: ignore[index]


def rollout_of(sets: list[dict[str, Any]], *deployments: dict[str, Any]) -> str:
    api = ApiGroup(CAPI, "v1beta1")
    listing = Listing(api=api, scalable={"MachineDeployment": list(deployments), "MachineSet": sets})
    snap = build_snapshot([listing], ())
    return snap.groups[MD_ID].rollout


def deployment() -> dict[str, Any]:
    md = scalable("md", group=CAPI, kind="MachineDeployment", namespace="team-a", replicas=2, annotations=limits(CAPI, 0, 5))
    md["metadata"]["uid"] = "md-uid"
    return md


def test_which_machine_sets_make_a_deployment_roll_out() -> None:
    md = deployment()
    # Only the current MachineSet has replicas: settled, whatever old ones are left at zero.
    assert rollout_of([machine_set(md, "a", "1", 0), machine_set(md, "b", "2", 2)], md) == ""
    assert rollout_of([machine_set(md, "b", "2", 2)], md) == ""
    # An old MachineSet still wanted (spec) or still counted (status) means rolling out.
    assert "MachineSet team-a/a (spec.replicas 1, status.replicas 1)" in rollout_of(
        [machine_set(md, "a", "1", 1), machine_set(md, "b", "2", 1)], md
    )
    assert "status.replicas 1" in rollout_of([machine_set(md, "a", "1", 0, status=1), machine_set(md, "b", "2", 2)], md)
    # Revisions compare as numbers, not text.
    assert "team-a/b (revision 10)" in rollout_of([machine_set(md, "a", "9", 1), machine_set(md, "b", "10", 1)], md)
    # An unreadable status.replicas on an old MachineSet keeps the nodes.
    assert "unreadable" in rollout_of([machine_set(md, "a", "1", 0, status="x"), machine_set(md, "b", "2", 2)], md)
    # A MachineSet without a revision is an old one beside revisioned ones.
    assert "team-a/a" in rollout_of([machine_set(md, "a", None, 1), machine_set(md, "b", "2", 1)], md)
    # Without any revision: one MachineSet with replicas is settled, two are rolling out.
    assert rollout_of([machine_set(md, "a", None, 2), machine_set(md, "b", None, 0)], md) == ""
    assert "none carries annotation" in rollout_of([machine_set(md, "a", None, 1), machine_set(md, "b", None, 1)], md)
    # A revision that is not an integer leaves the current MachineSet unknown: kept.
    assert "not an integer" in rollout_of([machine_set(md, "a", "one", 0), machine_set(md, "b", "2", 2)], md)
    # MachineSets of another deployment do not count.
    other = deployment()
    other["metadata"]["uid"] = "other-uid"
    other["metadata"]["name"] = "other"
    assert rollout_of([machine_set(other, "x", "1", 1), machine_set(md, "b", "2", 2)], md, other) == ""

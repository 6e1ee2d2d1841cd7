from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.autoscaler import Autoscaler, AutoscalerError, build_estimator
from clusterscaler.loop.decisions import ScaleDownStatus, ScaleUpStatus
from clusterscaler.loop.taints import DELETION_CANDIDATE_TAINT
from loopkit import Harness, pending_pod, registry, running_pod


def test_autoscaler_from_installed_plugins_runs_a_loop() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    h.add_pods([pending_pod("p", cpu="3")])
    a = Autoscaler.from_registry(
        registry(),
        options=h.options,
        provider=h.provider,
        source=h.cluster,
        actions=h.cluster,
        clock=h.clock,
    )
    assert a.run_once(h.clock.now()).scale_up.status is ScaleUpStatus.SUCCESSFUL
    assert g.target == 1


def test_unknown_estimator_names_the_flag_and_choices() -> None:
    options = dataclasses.replace(AutoscalingOptions(), estimator="nope")
    with pytest.raises(AutoscalerError, match=r"--estimator=nope: expected one of binpacking"):
        build_estimator(registry(), options)


def test_dry_run_decides_but_changes_nothing() -> None:
    h = Harness(dry_run=True)
    g = h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.run()
    result = h.run(timedelta(minutes=11))
    assert [d.node for d in result.scale_down.deletions] == ["g-2"]
    assert "g-2" in h.cluster.nodes and g.target == 2
    assert h.cluster.nodes["g-2"].taints == ()


def test_soft_taints_follow_unneeded_nodes_within_bulk_limit() -> None:
    h = Harness(max_bulk_soft_taint_count=2)
    h.provider.add_group("g", 0, 10, nodes=4)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.run()
    tainted = sorted(
        n
        for n, node in h.cluster.nodes.items()
        if any(t.key == DELETION_CANDIDATE_TAINT for t in node.taints)
    )
    assert len(tainted) == 2
    h.add_pods([running_pod(f"fill-{n}", n, cpu="3") for n in ("g-2", "g-3", "g-4")])
    h.run(timedelta(seconds=10))
    assert not any(
        t.key == DELETION_CANDIDATE_TAINT for node in h.cluster.nodes.values() for t in node.taints
    )


def test_scale_down_disabled_flag() -> None:
    h = Harness(scale_down_enabled=False)
    h.provider.add_group("g", 0, 10, nodes=2)
    assert h.run().scale_down.status is ScaleDownStatus.NOT_TRIED


def test_cloud_provider_refresh_failure_halts_the_loop() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    h.provider.refresh_error = "token expired"
    result = h.run()
    assert "token expired" in result.halted
    assert not result.health.healthy


def test_run_once_is_deterministic_given_inputs_and_clock() -> None:
    def scenario() -> list[dict[str, object]]:
        h = Harness(expander=["random"])
        h.provider.add_group("a", 0, 10, nodes=2)
        h.provider.add_group("b", 0, 10)
        h.provider.add_group("c", 0, 10)
        h.add_pods([running_pod("big", "a-1", cpu="3")])
        h.add_pods([pending_pod(f"p{i}", cpu="3") for i in range(3)])
        out = []
        for step in (timedelta(0), timedelta(minutes=1), timedelta(minutes=11)):
            doc = h.run(step).to_dict()
            doc.pop("duration")
            out.append(doc)
        return out

    assert scenario() == scenario()

"""The chart grants the CapacityQuota calls only with `extraArgs.capacity-quotas-enabled`,
and exactly the calls the quota cache and status writer make."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import yaml
from clusterscaler.commands.runtime import KubeRuntime
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.quotas import quota_statuses
from clusterscaler.simulator.builders import make_node
from clusterscaler.testing import helm
from clusterscaler.testing.fakekube import FakeKubeServer, capacity_quota_resources
from clusterscaler.testing.rbac import RbacAuthorizer


def rbac(tmp_path: Path, name: str, **extra_args: object) -> RbacAuthorizer:
    docs = helm.template({"cloudProvider": "kwok", "extraArgs": extra_args})
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
    return RbacAuthorizer.from_manifests([path], service_account=account["metadata"]["name"])


def test_capacity_quota_rbac_is_granted_with_the_flag_and_exactly_used(tmp_path: Path) -> None:
    with_flag = rbac(tmp_path, "on.yaml", **{"capacity-quotas-enabled": True})
    without = rbac(tmp_path, "off.yaml")
    off_by_value = rbac(tmp_path, "false.yaml", **{"capacity-quotas-enabled": False})

    options = dataclasses.replace(
        AutoscalingOptions(), capacity_quotas_enabled=True, leader_elect=False
    )
    with FakeKubeServer(resources=capacity_quota_resources()) as fake:
        fake.create(
            {
                "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
                "kind": "CapacityQuota",
                "metadata": {"name": "pool-a"},
                "spec": {"limits": {"resources": {"nodes": 3}}},
            }
        )
        api = fake.api_client()
        runtime = KubeRuntime.from_options(options, api_client=api, identity="me", serve=False)
        try:
            with runtime.source as source:
                assert source.wait_for_sync(10)
                quotas = source.snapshot().capacity_quotas
            assert [q.name for q in quotas] == ["pool-a"]
            assert runtime.quota_writer is not None
            statuses = quota_statuses(quotas, [make_node("n1")], datetime.now(UTC))
            assert runtime.quota_writer.write(statuses) == 1
        finally:
            runtime.stop()
            api.close()
        calls = [r for r in fake.requests if r.resource == "capacityquotas"]
    assert {(r.verb, r.subresource) for r in calls} == {
        ("list", ""),
        ("watch", ""),
        ("get", ""),
        ("update", "status"),
    }
    assert with_flag.denied(calls) == []
    assert len(without.denied(calls)) == len(calls)
    assert len(off_by_value.denied(calls)) == len(calls)
    # Each permission the flag adds is used by one of these calls.
    added = {str(g) for g in with_flag.grants()} - {str(g) for g in without.grants()}
    assert added and added.isdisjoint(str(g) for g in with_flag.unused(calls))

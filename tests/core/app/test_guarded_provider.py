"""Cloud writes go through a guard: skipped with --dry-run, refused once this process may
no longer act (a deletion in flight when the Lease is lost), passed through otherwise."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from clusterscaler.commands.run import LeadershipLostError, leader_guard
from clusterscaler.framework.dryrun import GuardedCloudProvider, dry_run_guard
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.interfaces.cloudprovider import ProviderProblem, provider_problems
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.testing.fakecloud import FakeCloud


def cloud() -> FakeCloud:
    c: FakeCloud = FakeCloud(InMemoryCluster(), VirtualClock(datetime(2024, 1, 1, tzinfo=UTC)))
    c.add_group("g", 0, 10, nodes=2)
    return c


def test_writes_pass_while_leading_and_are_refused_after_the_lease_is_lost() -> None:
    fake = cloud()
    leading = [True]
    provider = GuardedCloudProvider(fake, leader_guard(lambda: leading[0]))
    (group,) = provider.node_groups()
    group.increase_size(1)
    assert fake.groups["g"].target == 3
    leading[0] = False
    node = fake.cluster.nodes["g-1"]
    with pytest.raises(LeadershipLostError, match="delete_nodes on node group g refused"):
        group.delete_nodes([node])
    with pytest.raises(LeadershipLostError):
        group.increase_size(1)
    assert fake.groups["g"].target == 3
    assert "g-1" in fake.cluster.nodes
    assert [c[0] for c in fake.groups["g"].calls].count("delete_nodes") == 0


def test_dry_run_reads_the_real_groups_and_changes_nothing() -> None:
    fake = cloud()
    provider = GuardedCloudProvider(fake, dry_run_guard)
    (group,) = provider.node_groups()
    group.increase_size(2)
    group.delete_nodes([fake.cluster.nodes["g-1"]])
    group.decrease_target_size(-1)
    assert group.target_size() == 2 and fake.groups["g"].target == 2
    assert "g-1" in fake.cluster.nodes
    assert group.debug().endswith("(dry-run)")


def test_the_wrapped_providers_problems_stay_visible() -> None:
    fake = cloud()
    problem = ProviderProblem("h", "BadTag", "min is not a number")
    fake.problems = lambda: [problem]  # type: ignore[attr-defined]
    provider = GuardedCloudProvider(fake, dry_run_guard)
    assert provider_problems(provider) == [problem]

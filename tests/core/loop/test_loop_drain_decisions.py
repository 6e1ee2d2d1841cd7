"""Remembered drain decisions: one filter pass per pod while the PDB budgets stay as they
are, a fresh one once a budget is consumed; and a removal simulation that passes a pod
through many nodes decides on it as the plain filters would."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from clusterscaler.interfaces.podfilter import (
    BlockingPodReason,
    DrainContext,
    DrainDecision,
    DrainOutcome,
)
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.loop.scaledown.removal import RemovalSimulator
from clusterscaler.model import LabelSelector, Pod, PodDisruptionBudget
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.drain import PdbTracker, RememberedDecisions

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WEB = {"app": "web"}


@dataclasses.dataclass
class BudgetRule:
    """Blocks pods whose PDB has no disruption left; counts the pods it is asked about."""

    name: str = "budget"
    order: int = 1
    asked: list[str] = dataclasses.field(default_factory=list)

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        self.asked.append(pod.name)
        for pdb in context.pdbs.matching(pod):
            if context.pdbs.remaining[pdb.key] < 1:
                return DrainDecision(
                    DrainOutcome.BLOCK, BlockingPodReason.NOT_ENOUGH_PDB, detail="budget spent"
                )
        return None


def _pdb(allowed: int) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        "default", "web", selector=LabelSelector(tuple(WEB.items())), disruptions_allowed=allowed
    )


def test_decision_is_remembered_until_a_budget_is_consumed() -> None:
    rule = BudgetRule()
    context = DrainContext.build(NOW, pdbs=PdbTracker([_pdb(1)]))
    decide = RememberedDecisions()
    web = make_pod("web", labels=WEB)
    other = make_pod("other")
    assert decide(web, [rule], context).outcome is DrainOutcome.MOVE
    assert decide(web, [rule], context).outcome is DrainOutcome.MOVE
    assert decide(other, [rule], context).outcome is DrainOutcome.MOVE
    # An equal pod is another object: decided on its own.
    assert decide(dataclasses.replace(web), [rule], context).outcome is DrainOutcome.MOVE
    assert rule.asked == ["web", "other", "web"]
    context.pdbs.consume([other])  # no budget covers it: nothing changes
    assert decide(web, [rule], context).outcome is DrainOutcome.MOVE
    assert rule.asked == ["web", "other", "web"]
    context.pdbs.consume([web])
    assert decide(web, [rule], context).outcome is DrainOutcome.BLOCK
    assert rule.asked == ["web", "other", "web", "web"]


def test_pod_decided_before_a_budget_is_spent_is_decided_again() -> None:
    """n1 is tried first and fails (x has nowhere to go) with w1 free to move; then n0's
    pod moves and uses the only disruption, so on n1's next try w1 blocks."""
    snap = ClusterSnapshot()
    snap.add_node(make_node("n0", "4"), [make_pod("w0", "1", labels=WEB, node_name="n0")])
    snap.add_node(
        make_node("n1", "4"),
        [make_pod("w1", "1", labels=WEB, node_name="n1"), make_pod("x", "3", node_name="n1")],
    )
    snap.add_node(make_node("n2", "2"))
    rule = BudgetRule()
    context = DrainContext.build(NOW, pdbs=PdbTracker([_pdb(1)]))
    simulator = RemovalSimulator(snap, [rule], context, HintingSimulator())
    first = simulator.try_remove("n1")
    assert (first.removable, first.reason) == (False, UnremovableReason.NO_PLACE_TO_MOVE_PODS)
    moved = simulator.try_remove("n0")
    assert (moved.removable, moved.destinations) == (True, {"default/w0": "n2"})
    again = simulator.try_remove("n1")
    # Blocked by the rule itself (its detail), not only by the budget check after it.
    assert (again.removable, again.reason, again.detail) == (
        False,
        UnremovableReason.BLOCKED_BY_POD,
        "budget spent",
    )
    assert again.blocking is not None
    assert (again.blocking.pod, again.blocking.reason) == (
        "default/w1",
        BlockingPodReason.NOT_ENOUGH_PDB,
    )


def test_moved_pod_is_not_decided_again_on_its_new_node() -> None:
    snap = ClusterSnapshot()
    snap.add_node(make_node("n0", "4"), [make_pod("a", "1", node_name="n0")])
    snap.add_node(make_node("n1", "4"), [make_pod("b", "1", node_name="n1")])
    snap.add_node(make_node("n2", "4"), [make_pod("c", "2", node_name="n2")])
    rule = BudgetRule()
    context = DrainContext.build(NOW, pdbs=PdbTracker([]))
    simulator = RemovalSimulator(snap, [rule], context, HintingSimulator())
    assert simulator.try_remove("n0").destinations == {"default/a": "n1"}
    assert simulator.try_remove("n1").destinations == {"default/b": "n2", "default/a": "n2"}
    assert rule.asked == ["a", "b"]

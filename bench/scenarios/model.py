"""What a scenario is, what a loop decided, and whether that is what was expected."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Expected:
    """The decision the loop must take on a scenario.

    `None` leaves a figure unchecked. `all_pods_fit` requires that no pending pod is
    rejected by every node group as not fitting its template (the generator made every pod
    fit some group); `min_scale_up_nodes` is a lower bound on the nodes added and
    `min_unneeded_nodes` on the nodes found unneeded.
    """

    scale_up_nodes: int | None = None
    deleted_nodes: int | None = None
    min_scale_up_nodes: int = 0
    all_pods_fit: bool = False
    min_unneeded_nodes: int = 0

    def text(self) -> str:
        parts = []
        if self.scale_up_nodes is not None:
            parts.append(f"+{self.scale_up_nodes} nodes")
        elif self.min_scale_up_nodes:
            parts.append(f">= +{self.min_scale_up_nodes} nodes")
        if self.deleted_nodes is not None:
            parts.append(f"{self.deleted_nodes} removed")
        if self.min_unneeded_nodes:
            parts.append(f">= {self.min_unneeded_nodes} unneeded")
        if self.all_pods_fit:
            parts.append("every pod fits a group")
        return ", ".join(parts) or "(nothing)"


@dataclass(frozen=True)
class Decision:
    """What one loop decided, reduced to the figures the scenarios check."""

    scale_up_nodes: int = 0
    scale_up_groups: dict[str, int] = field(default_factory=dict)
    deleted_nodes: int = 0
    deleted_empty: int = 0
    unneeded_nodes: int = 0
    triggered_pods: int = 0
    pending_pods: int = 0
    unfit_pods: int = 0
    errors: tuple[str, ...] = ()

    def text(self) -> str:
        parts = []
        if self.scale_up_nodes:
            groups = len(self.scale_up_groups)
            where = f" in {groups} groups" if groups > 1 else ""
            parts.append(f"+{self.scale_up_nodes} nodes{where}")
        if self.deleted_nodes:
            parts.append(f"{self.deleted_nodes} removed ({self.deleted_empty} empty)")
        if self.unneeded_nodes and not self.deleted_nodes:
            parts.append(f"{self.unneeded_nodes} unneeded")
        if self.unfit_pods:
            parts.append(f"{self.unfit_pods} pods fit no group")
        if self.errors:
            parts.append(f"{len(self.errors)} errors")
        return ", ".join(parts) or "no change"

    def to_json(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["errors"] = list(self.errors)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Decision:
        return cls(**{**doc, "errors": tuple(doc.get("errors", ()))})


def check(expected: Expected, decision: Decision) -> list[str]:
    """The ways `decision` differs from `expected` (empty when it matches)."""
    problems = []
    if expected.scale_up_nodes is not None and decision.scale_up_nodes != expected.scale_up_nodes:
        problems.append(
            f"scale-up: expected +{expected.scale_up_nodes} nodes, got +{decision.scale_up_nodes}"
        )
    if decision.scale_up_nodes < expected.min_scale_up_nodes:
        problems.append(
            f"scale-up: expected at least +{expected.min_scale_up_nodes} nodes, "
            f"got +{decision.scale_up_nodes}"
        )
    if expected.deleted_nodes is not None and decision.deleted_nodes != expected.deleted_nodes:
        problems.append(
            f"scale-down: expected {expected.deleted_nodes} nodes marked for removal, "
            f"got {decision.deleted_nodes} (unneeded: {decision.unneeded_nodes})"
        )
    if decision.unneeded_nodes < expected.min_unneeded_nodes:
        problems.append(
            f"scale-down: expected at least {expected.min_unneeded_nodes} unneeded nodes, "
            f"got {decision.unneeded_nodes}"
        )
    if expected.all_pods_fit and decision.unfit_pods:
        problems.append(
            f"unschedulable: expected every pending pod to fit some node group, "
            f"{decision.unfit_pods} fit none"
        )
    if decision.errors:
        problems.append(f"errors: {'; '.join(decision.errors[:3])}")
    return problems


@dataclass(frozen=True)
class Scenario:
    """A generated benchmark input."""

    name: str
    title: str
    nodes: int
    pods: int
    snapshot: dict[str, Any]
    cloud_config: dict[str, Any]
    flags: tuple[str, ...]
    expected: Expected

    def renamed(self, name: str) -> Scenario:
        return dataclasses.replace(self, name=name)

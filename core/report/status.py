"""The status Cluster Autoscaler publishes in its ConfigMap, as plain data.

``AutoscalerStatus`` mirrors CA's ``ClusterAutoscalerStatus`` (pkg/clusterstate/api):
cluster-wide health, scale-up and scale-down conditions, and the same per node group.
``to_yaml`` renders it for the ``status`` key of the ``cluster-autoscaler-status`` ConfigMap
byte for byte as CA does: CA marshals the Go structs to JSON and the JSON to YAML, so the
keys come sorted, ``omitempty`` drops only empty strings and zero integers (a zero struct
stays: ``unready: {resourceUnready: 0, total: 0}``, ``backoffInfo: {}``), and an unset
time is ``null``;
``with_transitions`` carries ``lastTransitionTime`` over from the previous status for every
condition whose status did not change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import yaml

# One shape for node counts, from the loop's result to the ConfigMap.
from clusterscaler.loop.decisions import NodeCounts

if TYPE_CHECKING:
    from clusterscaler.loop.decisions import LoopResult

__all__ = [
    "AUTOSCALER_INITIALIZING",
    "AUTOSCALER_RUNNING",
    "BACKOFF",
    "CANDIDATES_PRESENT",
    "HEALTHY",
    "IN_PROGRESS",
    "LAST_UPDATED_ANNOTATION",
    "NEEDED",
    "NOT_NEEDED",
    "NO_ACTIVITY",
    "NO_CANDIDATES",
    "STATUS_KEY",
    "UNHEALTHY",
    "AutoscalerStatus",
    "Condition",
    "NodeCounts",
    "NodeGroupStatus",
    "format_last_updated",
    "initializing_status",
    "status_from_result",
    "to_dict",
    "to_yaml",
    "with_transitions",
]

STATUS_KEY = "status"
LAST_UPDATED_ANNOTATION = "cluster-autoscaler.kubernetes.io/last-updated"

AUTOSCALER_INITIALIZING = "Initializing"
AUTOSCALER_RUNNING = "Running"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
NEEDED = "Needed"
NOT_NEEDED = "NotNeeded"
IN_PROGRESS = "InProgress"
NO_ACTIVITY = "NoActivity"
BACKOFF = "Backoff"
CANDIDATES_PRESENT = "CandidatesPresent"
NO_CANDIDATES = "NoCandidates"

_HEALTH = (HEALTHY, UNHEALTHY)
_SCALE_UP = (NEEDED, NOT_NEEDED, IN_PROGRESS, NO_ACTIVITY, BACKOFF)
_SCALE_DOWN = (CANDIDATES_PRESENT, NO_CANDIDATES)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Condition:
    """A status with its probe and transition times."""

    status: str
    last_probe_time: datetime = _EPOCH
    last_transition_time: datetime = _EPOCH


@dataclass(frozen=True)
class NodeGroupStatus:
    """One node group's line in the status (CA's ``NodeGroupStatus``)."""

    name: str
    health: Condition
    node_counts: NodeCounts
    cloud_provider_target: int
    min_size: int
    max_size: int
    scale_up: Condition
    scale_down: Condition
    scale_down_candidates: int = 0
    backoff_error_code: str = ""
    backoff_error_message: str = ""


@dataclass(frozen=True)
class AutoscalerStatus:
    """The whole status (CA's ``ClusterAutoscalerStatus``)."""

    time: datetime
    autoscaler_status: str = AUTOSCALER_RUNNING
    message: str = ""
    health: Condition = field(default_factory=lambda: Condition(HEALTHY))
    node_counts: NodeCounts = field(default_factory=NodeCounts)
    scale_up: Condition = field(default_factory=lambda: Condition(NO_ACTIVITY))
    scale_down: Condition = field(default_factory=lambda: Condition(NO_CANDIDATES))
    scale_down_candidates: int = 0
    node_groups: tuple[NodeGroupStatus, ...] = ()

    def __post_init__(self) -> None:
        _check(
            "autoscalerStatus",
            self.autoscaler_status,
            (AUTOSCALER_INITIALIZING, AUTOSCALER_RUNNING),
        )
        _check("clusterWide.health.status", self.health.status, _HEALTH)
        _check("clusterWide.scaleUp.status", self.scale_up.status, _SCALE_UP)
        _check("clusterWide.scaleDown.status", self.scale_down.status, _SCALE_DOWN)
        for group in self.node_groups:
            _check(f"nodeGroups[{group.name}].health.status", group.health.status, _HEALTH)
            _check(f"nodeGroups[{group.name}].scaleUp.status", group.scale_up.status, _SCALE_UP)
            _check(
                f"nodeGroups[{group.name}].scaleDown.status", group.scale_down.status, _SCALE_DOWN
            )


def _check(field_name: str, value: str, allowed: tuple[str, ...]) -> None:
    # Empty is CA's zero value (the Initializing status has no conditions yet).
    if value and value not in allowed:
        raise ValueError(f"status {field_name}: {value!r} is not one of {', '.join(allowed)}")


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_last_updated(value: datetime) -> str:
    """CA's timestamp form for ``time`` and the last-updated annotation
    (Go layout ``2006-01-02 15:04:05.999999999 -0700 MST``)."""
    utc = value.astimezone(UTC)
    fraction = f"{utc.microsecond:06d}".rstrip("0")
    seconds = utc.strftime("%Y-%m-%d %H:%M:%S") + (f".{fraction}" if fraction else "")
    return f"{seconds} +0000 UTC"


def _counts(counts: NodeCounts) -> dict[str, Any]:
    # CA's RegisteredNodeCount: beingDeleted is the only omitempty integer; unready is a
    # struct, so it is always there.
    registered: dict[str, Any] = {
        "total": counts.total,
        "ready": counts.ready,
        "notStarted": counts.not_started,
        "suspended": counts.suspended,
    }
    if counts.being_deleted:
        registered["beingDeleted"] = counts.being_deleted
    registered["unready"] = {
        "total": counts.unready,
        "resourceUnready": counts.resource_unready,
    }
    return {
        "registered": registered,
        "longUnregistered": counts.long_unregistered,
        "unregistered": counts.unregistered,
    }


def _probe_time(value: datetime) -> str | None:
    # metav1.Time: RFC 3339 in seconds, null when unset.
    return None if value == _EPOCH else _time(value)


def _condition(condition: Condition, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"status": condition.status} if condition.status else {}
    out.update(extra)
    out["lastProbeTime"] = _probe_time(condition.last_probe_time)
    out["lastTransitionTime"] = _probe_time(condition.last_transition_time)
    return out


def _scale_down(condition: Condition, candidates: int) -> dict[str, Any]:
    return _condition(condition, **({"candidates": candidates} if candidates else {}))


def to_dict(status: AutoscalerStatus) -> dict[str, Any]:
    """The status as CA serialises it (JSON field names)."""
    out: dict[str, Any] = {"time": format_last_updated(status.time)}
    if status.autoscaler_status:
        out["autoscalerStatus"] = status.autoscaler_status
    if status.message:
        out["message"] = status.message
    out["clusterWide"] = {
        "health": _condition(status.health, nodeCounts=_counts(status.node_counts)),
        "scaleUp": _condition(status.scale_up),
        "scaleDown": _scale_down(status.scale_down, status.scale_down_candidates),
    }
    groups: list[dict[str, Any]] = []
    for group in status.node_groups:
        info: dict[str, str] = {}
        if group.backoff_error_code:
            info["errorCode"] = group.backoff_error_code
        if group.backoff_error_message:
            info["errorMessage"] = group.backoff_error_message
        groups.append(
            {
                "name": group.name,
                "health": _condition(
                    group.health,
                    nodeCounts=_counts(group.node_counts),
                    cloudProviderTarget=group.cloud_provider_target,
                    minSize=group.min_size,
                    maxSize=group.max_size,
                ),
                "scaleUp": _condition(group.scale_up, backoffInfo=info),
                "scaleDown": _scale_down(group.scale_down, group.scale_down_candidates),
            }
        )
    if groups:
        out["nodeGroups"] = groups
    return out


class _GoYamlDumper(yaml.SafeDumper):
    """Quotes as Go's YAML encoder does: a string that would read as another type (a
    timestamp, a number) in double quotes."""

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style


def to_yaml(status: AutoscalerStatus) -> str:
    """The value of the ConfigMap's ``status`` key, as CA writes it (keys sorted)."""
    return yaml.dump(
        to_dict(status),
        Dumper=_GoYamlDumper,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
    )


def _carry(previous: Condition | None, current: Condition) -> Condition:
    if previous is not None and previous.status == current.status:
        return dataclasses.replace(current, last_transition_time=previous.last_transition_time)
    return dataclasses.replace(current, last_transition_time=current.last_probe_time)


def with_transitions(
    previous: AutoscalerStatus | None, current: AutoscalerStatus
) -> AutoscalerStatus:
    """``current`` with transition times kept from ``previous`` where a status is unchanged
    and set to the probe time where it changed (or is new)."""
    old_groups = {g.name: g for g in previous.node_groups} if previous else {}
    groups = []
    for group in current.node_groups:
        old = old_groups.get(group.name)
        groups.append(
            dataclasses.replace(
                group,
                health=_carry(old.health if old else None, group.health),
                scale_up=_carry(old.scale_up if old else None, group.scale_up),
                scale_down=_carry(old.scale_down if old else None, group.scale_down),
            )
        )
    return dataclasses.replace(
        current,
        health=_carry(previous.health if previous else None, current.health),
        scale_up=_carry(previous.scale_up if previous else None, current.scale_up),
        scale_down=_carry(previous.scale_down if previous else None, current.scale_down),
        node_groups=tuple(groups),
    )


def status_from_result(result: LoopResult) -> AutoscalerStatus:
    """The status a loop's result publishes (transition times: see ``with_transitions``).

    As in CA, cluster-wide scale-up is InProgress while any group waits for requested nodes
    and NoActivity otherwise; a group in backoff says Backoff with its error code and
    message; scale-down lists how many nodes are unneeded. The message names why the loop
    halted, the caches that stopped following the cluster (scale-down and instance
    clean-up wait for them), each configuration problem the provider reported, as
    ``<node group>: <reason>: <message>``, and each group whose nodes the provider says may
    not be removed now, as ``<node group>: scale-down blocked: <why>``.
    """
    now = result.time
    unneeded_by_group: dict[str, int] = {}
    for unneeded in result.scale_down.unneeded:
        unneeded_by_group[unneeded.node_group] = unneeded_by_group.get(unneeded.node_group, 0) + 1
    groups = []
    for group in result.node_groups:
        backoff = group.backoff if group.backoff is not None and group.backoff.until > now else None
        if group.scale_up_in_progress:
            scale_up = IN_PROGRESS
        elif backoff is not None:
            scale_up = BACKOFF
        else:
            scale_up = NO_ACTIVITY
        candidates = unneeded_by_group.get(group.name, 0)
        groups.append(
            NodeGroupStatus(
                name=group.name,
                health=Condition(HEALTHY if group.healthy else UNHEALTHY, now),
                node_counts=group.counts,
                cloud_provider_target=group.target_size,
                min_size=group.min_size,
                max_size=group.max_size,
                scale_up=Condition(scale_up, now),
                scale_down=Condition(CANDIDATES_PRESENT if candidates else NO_CANDIDATES, now),
                scale_down_candidates=candidates,
                backoff_error_code=backoff.error_code if backoff else "",
                backoff_error_message=backoff.error_message if backoff else "",
            )
        )
    in_progress = any(g.scale_up_in_progress for g in result.node_groups)
    candidates = len(result.scale_down.unneeded)
    # CA's per-group schema has no message field: the provider's configuration problems
    # (a misconfigured node group) go into the cluster-wide message, after the halt reason.
    parts = [result.halted or result.health.message]
    if result.stale_caches:
        parts.append(
            "stale caches, scale-down and instance clean-up paused: "
            + "; ".join(result.stale_caches)
        )
    if result.unreadable:
        shown = "; ".join(f"{u.kind} {u.key}: {u.error}" for u in result.unreadable[:3])
        more = len(result.unreadable) - 3
        parts.append(
            f"{len(result.unreadable)} object(s) cannot be read and are left out (the nodes "
            f"their pods are bound to are kept): {shown}" + (f" and {more} more" if more > 0 else "")
        )
    parts.extend(f"{p.node_group}: {p.reason}: {p.message}" for p in result.problems)
    parts.extend(
        f"{g.name}: scale-down blocked: {g.scale_down_blocked}"
        for g in result.node_groups
        if g.scale_down_blocked
    )
    return AutoscalerStatus(
        time=now,
        autoscaler_status=AUTOSCALER_RUNNING,
        message="; ".join(part for part in parts if part),
        health=Condition(HEALTHY if result.health.healthy else UNHEALTHY, now),
        node_counts=result.health.counts,
        scale_up=Condition(IN_PROGRESS if in_progress else NO_ACTIVITY, now),
        scale_down=Condition(CANDIDATES_PRESENT if candidates else NO_CANDIDATES, now),
        scale_down_candidates=candidates,
        node_groups=tuple(groups),
    )


def initializing_status(now: datetime, message: str = "") -> AutoscalerStatus:
    """The status written before the first loop (caches syncing, leader election): as CA's
    EmptyClusterAutoscalerStatus, ``Initializing`` and nothing else known yet."""
    return AutoscalerStatus(
        time=now,
        autoscaler_status=AUTOSCALER_INITIALIZING,
        message=message,
        health=Condition(""),
        scale_up=Condition(""),
        scale_down=Condition(""),
    )

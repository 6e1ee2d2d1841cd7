"""The events of CapacityBuffers' placeholder pods, recorded on their buffers as CA's
FakePodsScaleUpStatusProcessor records them: the pods exist nowhere, their buffer does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from clusterscaler.report.events import (
    NORMAL,
    NOT_TRIGGER_SCALE_UP,
    TRIGGERED_SCALE_UP,
    Event,
    GroupResize,
    ObjectRef,
)

if TYPE_CHECKING:
    from clusterscaler.loop.capacitybuffers import BufferResult
    from clusterscaler.loop.decisions import LoopResult

__all__ = ["buffer_events"]


def buffer_events(
    result: LoopResult,
    buffer_of: Mapping[str, BufferResult],
    resizes_by_pod: Mapping[str, Sequence[GroupResize]],
    reasons_by_pod: Mapping[str, Sequence[str]],
) -> list[Event]:
    """Per buffer, how many of its placeholder pods triggered the scale-up
    (TriggeredScaleUp), or, when nothing was scaled up, did not (NotTriggerScaleUp, with
    each pod's reasons). `buffer_of` maps each placeholder pod to its buffer,
    `resizes_by_pod` the pods the scale-up helps to its resizes, `reasons_by_pod` the
    placeholders no group helps to their reasons."""
    from clusterscaler.loop.decisions import ScaleUpStatus

    out: list[Event] = []
    triggered: dict[str, list[str]] = {}
    resizes: list[GroupResize] = []
    for pod, pod_resizes in resizes_by_pod.items():
        if pod in buffer_of:
            triggered.setdefault(buffer_of[pod].key, []).append(pod)
            resizes.extend(r for r in pod_resizes if r not in resizes)
    refs = {r.key: _buffer_ref(r) for r in buffer_of.values()}
    if result.scale_up.decisions:
        for key, pods in sorted(triggered.items()):
            out.append(Event(
                refs[key], NORMAL, TRIGGERED_SCALE_UP,
                f"capacity buffer {len(pods)} fake pods triggered scale-up: "
                f"[{' '.join(str(r) for r in resizes)}]",
            ))
    if result.scale_up.status not in (ScaleUpStatus.SUCCESSFUL, ScaleUpStatus.ERROR):
        remaining: dict[str, list[str]] = {}
        for pod, reasons in reasons_by_pod.items():
            remaining.setdefault(buffer_of[pod].key, []).append(", ".join(reasons))
        for key, messages in sorted(remaining.items()):
            out.append(Event(
                refs[key], NORMAL, NOT_TRIGGER_SCALE_UP,
                f"capacity buffer {len(messages)} fake pods didn't trigger scale-up: "
                + ",".join(messages),
            ))
    return out


def _buffer_ref(r: BufferResult) -> ObjectRef:
    return ObjectRef("CapacityBuffer", r.name, r.namespace, r.uid, r.api_version)

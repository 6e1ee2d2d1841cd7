"""CapacityBuffers in the loop, as Cluster Autoscaler's `capacitybuffer/` packages (the
buffer controller: filters, translators, quota allocation) and its
`processors/capacitybuffer` pod-list processor handle them.

Each loop:
1. `buffer_controller.reconcile` (--capacity-buffer-controller-enabled): every buffer of the active
   provisioning strategy gets the PodTemplate its chunks are made from (a copy of its
   `podTemplateRef`, or the most recent pod of its `scalableRef`'s workload, named
   `capacitybuffer-<buffer>-pod-template` and owned by the buffer), the number of chunks
   (the smallest of `replicas`, `percentage` of the workload's replicas and what fits
   `limits`) and ReadyForProvisioning; then the namespace's ResourceQuotas are shared out
   among its buffers, oldest first (LimitedByQuotas).
2. `inject` (--capacity-buffer-pod-injection-enabled): each ready buffer whose status is
   current with its PodTemplate becomes that many placeholder pods, which the loop
   treats as unschedulable pods: they are never created nor bound. What fits existing
   nodes stays in the snapshot, so scale-down keeps the room (the pods are safe to evict,
   so a node is removable when they fit elsewhere); the rest is what scale-up buys nodes
   for. The buffer gets Provisioning.

Both run as the pod-list processor `capacity-buffers` the standard plugins register
(`CapacityBufferProcessor.process`), which adds the placeholder pods to the pods waiting
for a node. The status each buffer should have is `BufferResult.status`; the caller writes it (and
the managed PodTemplate) when it differs from what the buffer holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import structlog
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.podlistprocessor import PodListContext, PodListProcessor
from clusterscaler.loop.buffer_controller import (
    BufferStatus,
    ManagedTemplate,
    Translated,
    managed_template_name,
    reconcile,
)
from clusterscaler.model import Controller, OwnerRef, Pod
from clusterscaler.model.capacitybuffer import (
    ACTIVE_PROVISIONING_STRATEGY,
    CAPACITY_BUFFER_API_VERSION,
    CAPACITY_BUFFER_KIND,
    FAILED_TO_RESOLVE_POD,
    FAILED_TO_WRITE_TEMPLATE,
    PROVISIONING,
    READY_FOR_PROVISIONING,
    CapacityBuffer,
    ResourceQuota,
)
from clusterscaler.model.provisioning import Condition, PodTemplate, set_condition

__all__ = [
    "FAKE_POD_ANNOTATION",
    "FAKE_POD_ANNOTATION_VALUE",
    "BufferResult",
    "BufferStatus",
    "CapacityBufferProcessor",
    "ManagedTemplate",
    "capacity_buffer_pods",
    "is_buffer_pod",
    "managed_template_name",
]

log = structlog.get_logger()

# The placeholder pods' mark (CA's CapacityBufferFakePodAnnotationKey and value).
FAKE_POD_ANNOTATION = "podType"
FAKE_POD_ANNOTATION_VALUE = "capacityBufferFakePod"
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"

# Provisioning reasons (CA's processors/capacitybuffer).
NOT_READY_FOR_PROVISIONING_REASON = "NotReadyForProvisioning"
BUFFER_IS_EMPTY_REASON = "BufferIsEmpty"
FAILED_TO_GET_POD_TEMPLATE_REASON = "FailedToGetPodTemplate"
FAKE_PODS_INJECTED_REASON = "FakePodsInjected"


def is_buffer_pod(pod: Pod) -> bool:
    """Whether `pod` is a placeholder of a CapacityBuffer (never a pod of the cluster)."""
    return pod.annotations.get(FAKE_POD_ANNOTATION) == FAKE_POD_ANNOTATION_VALUE


@dataclass(frozen=True, slots=True)
class BufferResult:
    """A buffer as the loop leaves it: the status it should have, the PodTemplate its
    controller keeps for it (with --capacity-buffer-controller-enabled), and the
    placeholder pods injected for it this loop."""

    namespace: str
    name: str
    uid: str
    status: BufferStatus
    held: BufferStatus
    template: ManagedTemplate | None = None
    pods: tuple[str, ...] = ()
    api_version: str = CAPACITY_BUFFER_API_VERSION
    # Why the controller could not translate it (logged, counted).
    error: str = ""
    # Whether its controller reconciled it this loop, and when it was created (for
    # capacity_buffer_oldest_reconciliation_timestamp_seconds).
    reconciled: bool = False
    created: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def changed(self) -> bool:
        """Whether the status written differs from the status held."""
        return not self.status.same_as(self.held)


@dataclass
class CapacityBufferProcessor:
    """The buffers' steps of one loop (see the module's docstring), as a pod-list
    processor."""

    controller_enabled: bool = False
    injection_enabled: bool = False
    name: str = "capacity-buffers"
    order: int = 200
    _results: dict[str, BufferResult] = field(default_factory=dict)
    _buffer_of_pod: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: AutoscalingOptions) -> CapacityBufferProcessor:
        return cls(
            controller_enabled=bool(options.capacity_buffer_controller_enabled),
            injection_enabled=bool(options.capacity_buffer_pod_injection_enabled),
        )

    @property
    def enabled(self) -> bool:
        return self.controller_enabled or self.injection_enabled

    def results(self) -> tuple[BufferResult, ...]:
        return tuple(self._results[k] for k in sorted(self._results))

    def buffer_of_pod(self, pod_key: str) -> str:
        """The buffer (`namespace/name`) a placeholder pod was injected for, or ""."""
        return self._buffer_of_pod.get(pod_key, "")

    def process(self, pods: Sequence[Pod], context: PodListContext) -> list[Pod]:
        """`pods` and the buffers' placeholder pods after them (`run` over the cluster's
        buffers)."""
        injected = self.run(
            context.capacity_buffers,
            context.pod_templates,
            pods=context.pods,
            controllers=context.controllers,
            quotas=context.resource_quotas,
            now=context.now,
        )
        return [*pods, *injected]

    def run(
        self,
        buffers: Sequence[CapacityBuffer],
        templates: Iterable[PodTemplate],
        *,
        pods: Sequence[Pod] = (),
        controllers: Sequence[Controller] = (),
        quotas: Sequence[ResourceQuota] = (),
        now: datetime,
    ) -> list[Pod]:
        """Reconcile (with the controller) and inject (with the injection): the buffers'
        statuses for `results()`, and the placeholder pods to treat as unschedulable."""
        self._results = {}
        self._buffer_of_pod = {}
        if not self.enabled or not buffers:
            return []
        by_name = {t.key: t for t in templates}
        translated: dict[str, Translated] = {}
        if self.controller_enabled:
            translated = reconcile(buffers, by_name, pods, controllers, quotas, now)
        injected: list[Pod] = []
        for buffer in buffers:
            t = translated.get(buffer.key)
            held = BufferStatus.of(buffer)
            status = t.status if t is not None else held
            made: list[Pod] = []
            if self.injection_enabled:
                status, made = self._inject(buffer, status, t, by_name, now)
            injected.extend(made)
            if t is None and not made and status == held:
                continue
            result = BufferResult(
                namespace=buffer.namespace,
                name=buffer.name,
                uid=buffer.uid,
                status=status,
                held=held,
                template=t.template if t is not None else None,
                pods=tuple(p.key for p in made),
                api_version=buffer.api_version,
                error=t.error if t is not None else "",
                reconciled=t is not None,
                created=buffer.creation_time,
            )
            self._results[buffer.key] = result
            for p in made:
                self._buffer_of_pod[p.key] = buffer.key
        if injected:
            log.info(
                "capacity_buffer_pods_injected",
                pods=len(injected),
                buffers=sum(1 for r in self._results.values() if r.pods),
            )
        return injected

    # ------------------------------------------------------------------ injection

    def _inject(
        self,
        buffer: CapacityBuffer,
        status: BufferStatus,
        translated: Translated | None,
        templates: Mapping[str, PodTemplate],
        now: datetime,
    ) -> tuple[BufferStatus, list[Pod]]:
        """CA's CapacityBufferPodListProcessor for one buffer: the placeholder pods and
        the Provisioning condition."""
        if status.provisioning_strategy != ACTIVE_PROVISIONING_STRATEGY:
            return status, []
        # CA's status filter: ReadyForProvisioning or Provisioning true.
        if not (status.has(READY_FOR_PROVISIONING, "True") or status.has(PROVISIONING, "True")):
            return status, []
        fresh = translated is not None and translated.pod is not None
        if fresh and _template_not_written(buffer):
            # The template this status names could not be written (its writer said why):
            # not ready until it is.
            return _provisioning(status, "False", NOT_READY_FOR_PROVISIONING_REASON,
                                 "CapacityBuffer is not ready for provisioning", now), []
        # The controller's pod: the PodTemplate its writer made (by the server-side
        # dry-run, admission defaults applied) once the cluster holds the one the status
        # names, until then the source it is made from (buffer_controller._translate).
        source: Pod | None = translated.pod if fresh and translated is not None else None
        if not fresh and status.pod_template_ref is not None:
            held = templates.get(f"{buffer.namespace}/{status.pod_template_ref}")
            # CA's generation filter: a template changed since the status was written
            # waits for its controller.
            if (
                held is not None
                and status.pod_template_generation is not None
                and held.generation != status.pod_template_generation
            ):
                return status, []
            source = held.pod if held is not None else None
        if (
            status.pod_template_ref is None
            or status.replicas is None
            or status.has(READY_FOR_PROVISIONING, "False")
        ):
            return _provisioning(status, "False", NOT_READY_FOR_PROVISIONING_REASON,
                                 "CapacityBuffer is not ready for provisioning", now), []
        if status.replicas == 0:
            return _provisioning(status, "False", BUFFER_IS_EMPTY_REASON,
                                 "CapacityBuffer has zero replicas", now), []
        if source is None:
            return _provisioning(
                status, "False", FAILED_TO_GET_POD_TEMPLATE_REASON,
                "failed to get pod template with error: capacity buffer client can't get "
                f'pod template: podtemplates "{status.pod_template_ref}" not found',
                now,
            ), []
        pods = _placeholder_pods(buffer, source, status.replicas)
        return _provisioning(status, "True", FAKE_PODS_INJECTED_REASON, "", now), pods


def capacity_buffer_pods(options: AutoscalingOptions) -> PodListProcessor:
    """The pod-list processor `capacity-buffers` (see `CapacityBufferProcessor`)."""
    return CapacityBufferProcessor.from_options(options)


def _provisioning(status: BufferStatus, value: str, reason: str, message: str,
                  now: datetime) -> BufferStatus:
    conditions = set_condition(
        status.conditions, Condition(PROVISIONING, value, reason, message, now, 0)
    )
    return dataclasses.replace(status, conditions=conditions)


def _template_not_written(buffer: CapacityBuffer) -> bool:
    held = buffer.condition(READY_FOR_PROVISIONING)
    if held is None or held.status != "False":
        return False
    why = held.message.removeprefix("Buffer not ready for provisioning: ")
    return why.startswith((FAILED_TO_RESOLVE_POD, FAILED_TO_WRITE_TEMPLATE))


def _placeholder_pods(buffer: CapacityBuffer, source: Pod, count: int) -> list[Pod]:
    """CA's makeFakePods: `count` copies of the template's pod, owned by the buffer, marked
    as placeholders and safe to evict."""
    owner = OwnerRef(CAPACITY_BUFFER_KIND, buffer.name, buffer.uid, True,
                     CAPACITY_BUFFER_API_VERSION)
    annotations = {
        **source.annotations,
        FAKE_POD_ANNOTATION: FAKE_POD_ANNOTATION_VALUE,
        SAFE_TO_EVICT_ANNOTATION: "true",
    }
    return [
        source.with_(
            name=f"capacity-buffer-{buffer.name}-{i}",
            namespace=buffer.namespace,
            uid=f"{buffer.uid}-{i}",
            annotations=annotations,
            owner=owner,
            owners=(owner,),
            node_name="",
            nominated_node_name="",
            phase="Pending",
            unschedulable=True,
            creation_time=None,
            deletion_time=None,
        )
        for i in range(1, count + 1)
    ]

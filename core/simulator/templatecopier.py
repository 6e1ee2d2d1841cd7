"""Turning a node group's template node info into concrete simulated nodes."""

from __future__ import annotations

from collections.abc import Callable

from clusterscaler.model import HOSTNAME_LABEL, Node, NodeInfo, Pod, ResourceSlice, field_replacer
from clusterscaler.simulator.dra import template_slices

__all__ = ["AUTOSCALER_TAINTS", "TemplateCopier", "sanitize_template"]

# Taints the autoscaler itself puts on nodes it is removing; a new node never has them.
AUTOSCALER_TAINTS = frozenset(
    {"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"}
)

# `dataclasses.replace` of the fields a copy changes, without going through `__init__`.
_copy_node: Callable[..., Node] = field_replacer(
    Node, ("name", "labels", "taints", "uid", "provider_id", "unschedulable", "deletion_time")
)
_copy_pod: Callable[..., Pod] = field_replacer(Pod, ("name", "uid", "node_name"))


class TemplateCopier:
    """Copies of one template node info under new names, as `sanitize_template` makes them.

    The estimator adds template nodes by the thousand per loop; what does not depend on the
    new name (the taints kept, the labels but the hostname) is worked out once here, and
    each copy only sets the name-dependent fields. Copies are equal to what
    `sanitize_template` returned before this existed: the same fields, values and types.
    """

    __slots__ = ("_labels", "_node", "_pods", "_slices", "_taints")

    def __init__(
        self,
        template: NodeInfo,
        ignored_taints: frozenset[str] = frozenset(),
        ignored_prefixes: tuple[str, ...] = (),
    ) -> None:
        node = template.node
        self._node = node
        self._labels = dict(node.labels)
        self._taints = tuple(
            t
            for t in node.taints
            if t.key not in AUTOSCALER_TAINTS
            and t.key not in ignored_taints
            and not (ignored_prefixes and t.key.startswith(ignored_prefixes))
        )
        self._pods = template.pods
        self._slices = template.resource_slices

    def copy(self, name: str) -> tuple[Node, list[Pod]]:
        """A copy called `name`, with its pods renamed to match (see `sanitize_template`)."""
        labels = self._labels.copy()
        labels[HOSTNAME_LABEL] = name
        new_node = _copy_node(
            self._node, name, labels, self._taints, f"{name}-uid", "", self._node.unschedulable, None
        )
        pods = [_copy_pod(p, f"{p.name}-{name}", f"{p.uid}-{name}", name) for p in self._pods]
        return new_node, pods

    def slices(self, name: str) -> tuple[ResourceSlice, ...]:
        """The template's ResourceSlices (DRA devices) for the copy called `name`."""
        return template_slices(self._slices, name) if self._slices else ()


def sanitize_template(
    template: NodeInfo,
    name: str,
    ignored_taints: frozenset[str] = frozenset(),
    ignored_prefixes: tuple[str, ...] = (),
) -> tuple[Node, list[Pod]]:
    """A copy of `template` as a node called `name`, with its pods renamed to match.

    The hostname label follows the new name (so hostname anti-affinity treats copies as
    distinct nodes), the autoscaler's own taints, `ignored_taints` (startup and status taints,
    by key) and taints whose key starts with one of `ignored_prefixes` are dropped, the
    template's .spec.unschedulable is kept (a template is made schedulable, or not, once,
    from its source and --scale-from-unschedulable), and each
    template pod (DaemonSet pods, usually) becomes `<pod>-<name>` bound to the new node.
    Callers making many copies of one template use a `TemplateCopier`.
    """
    return TemplateCopier(template, ignored_taints, ignored_prefixes).copy(name)

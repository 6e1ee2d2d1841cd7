"""ASG tags that shape the template node and per-group options.

```
k8s.io/cluster-autoscaler/node-template/label/<key>               = <value>
k8s.io/cluster-autoscaler/node-template/taint/<key>               = <value>:<Effect>
k8s.io/cluster-autoscaler/node-template/resources/<name>          = <quantity>
k8s.io/cluster-autoscaler/node-template/autoscaling-options/<opt> = <value>
k8s.io/cluster-autoscaler/node-template/dra-driver                = <driver>
```

`dra-driver` is clusterscaler's (upstream's AWS provider has no DRA tag): the DRA driver
that publishes the instance's GPUs, which are then devices of that driver in the template
(`gpu_template_slices`) instead of the `nvidia.com/gpu` extended resource.

Parsing never raises: every bad tag becomes a `TagError` naming the ASG, the tag and the
expected form, so that one badly tagged ASG is reported while the others keep scaling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.api import (
    DRA_DRIVER_FORM,
    GROUP_OPTION_NAMES,
    GroupOptionError,
    NodeGroupOptions,
    Taint,
    is_dra_driver_name,
    is_label_value,
    is_qualified_name,
    parse_group_option,
)

TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
LABEL_PREFIX = TEMPLATE_PREFIX + "label/"
TAINT_PREFIX = TEMPLATE_PREFIX + "taint/"
RESOURCES_PREFIX = TEMPLATE_PREFIX + "resources/"
OPTIONS_PREFIX = TEMPLATE_PREFIX + "autoscaling-options/"
DRA_DRIVER_TAG = TEMPLATE_PREFIX + "dra-driver"
# Tags EKS puts on the ASGs of managed node groups.
EKS_CLUSTER_TAG = "eks:cluster-name"
EKS_NODEGROUP_TAG = "eks:nodegroup-name"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class TagError:
    """A tag whose key or value is not of the expected form."""

    asg: str
    tag: str
    value: str
    expected: str

    def __str__(self) -> str:
        return f"ASG {self.asg!r}: tag {self.tag!r}={self.value!r}: expected {self.expected}"


@dataclass(frozen=True, slots=True)
class TemplateTags:
    """What an ASG's tags say about its nodes and options."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # Raw quantities by resource name; turned into numbers when the template is built.
    resources: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, str] = field(default_factory=dict)
    # The DRA driver publishing the instance's GPUs, if they are DRA devices.
    dra_driver: str = ""
    eks_cluster: str = ""
    eks_nodegroup: str = ""
    errors: tuple[TagError, ...] = ()


def parse_template_tags(asg: str, tags: Mapping[str, str]) -> TemplateTags:
    """Split an ASG's tags into labels, taints, resources and options, collecting errors."""
    labels: dict[str, str] = {}
    taints: dict[str, Taint] = {}
    resources: dict[str, str] = {}
    options: dict[str, str] = {}
    dra_driver = ""
    errors: list[TagError] = []
    for key in sorted(tags):
        value = tags[key]
        if key.startswith(LABEL_PREFIX):
            name = key[len(LABEL_PREFIX) :]
            if not is_qualified_name(name):
                errors.append(TagError(asg, key, value, "a label key such as example.com/role after "
                                       f"{LABEL_PREFIX}"))
            elif not is_label_value(value):
                errors.append(TagError(asg, key, value, "a label value of at most 63 alphanumerics, "
                                       "'-', '_' or '.', starting and ending alphanumeric"))
            else:
                labels[name] = value
        elif key.startswith(TAINT_PREFIX):
            name = key[len(TAINT_PREFIX) :]
            taint_value, sep, effect = value.rpartition(":")
            if not is_qualified_name(name):
                errors.append(TagError(asg, key, value, "a taint key such as dedicated after "
                                       f"{TAINT_PREFIX}"))
            elif not sep or effect not in TAINT_EFFECTS:
                errors.append(TagError(asg, key, value, "<value>:<effect> with effect one of "
                                       f"{', '.join(TAINT_EFFECTS)}, e.g. gpu:NoSchedule"))
            elif not is_label_value(taint_value):
                errors.append(TagError(asg, key, value, "a taint value of at most 63 alphanumerics, "
                                       "'-', '_' or '.' before ':<effect>'"))
            else:
                taints[name] = Taint(key=name, value=taint_value, effect=effect)
        elif key.startswith(RESOURCES_PREFIX):
            name = key[len(RESOURCES_PREFIX) :]
            if not is_qualified_name(name):
                errors.append(TagError(asg, key, value, "a resource name such as "
                                       f"ephemeral-storage or nvidia.com/gpu after {RESOURCES_PREFIX}"))
            else:
                resources[name] = value.strip()
        elif key.startswith(OPTIONS_PREFIX):
            name = key[len(OPTIONS_PREFIX) :]
            if name:
                options[name] = value.strip()
        elif key == DRA_DRIVER_TAG:
            if is_dra_driver_name(value.strip()):
                dra_driver = value.strip()
            else:
                errors.append(TagError(asg, key, value, DRA_DRIVER_FORM))
    eks_cluster = tags.get(EKS_CLUSTER_TAG, "")
    eks_nodegroup = tags.get(EKS_NODEGROUP_TAG, "")
    return TemplateTags(
        labels=labels,
        taints=tuple(taints[k] for k in sorted(taints)),
        resources=resources,
        options=options,
        dra_driver=dra_driver,
        eks_cluster=eks_cluster,
        eks_nodegroup=eks_nodegroup,
        errors=tuple(errors),
    )


KNOWN_OPTIONS = GROUP_OPTION_NAMES


def parse_node_group_options(
    asg: str, options: Mapping[str, str]
) -> tuple[NodeGroupOptions | None, tuple[TagError, ...]]:
    """Per-group overrides from `autoscaling-options/<opt>` tags.

    Returns `None` when no option is set. An unparsable or unknown option is reported and
    ignored, the others still apply.
    """
    values: dict[str, Any] = {}
    errors: list[TagError] = []
    for name in sorted(options):
        raw = options[name]
        try:
            option, value = parse_group_option(name, raw)
        except GroupOptionError as exc:
            errors.append(TagError(asg, OPTIONS_PREFIX + name, raw, exc.expected))
            continue
        values[option] = value
    return (NodeGroupOptions(**values) if values else None), tuple(errors)

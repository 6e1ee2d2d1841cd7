"""Scale set tags that shape the template node and the per-group options.

Azure tag names cannot hold `/`, so Cluster Autoscaler's template tags use `_` for it and
`~2` for a literal `_`:

```
k8s.io_cluster-autoscaler_node-template_label_<key>               = <value>
k8s.io_cluster-autoscaler_node-template_taint_<key>               = <value>:<Effect>
k8s.io_cluster-autoscaler_node-template_resources_<name>          = <quantity>
k8s.io_cluster-autoscaler_node-template_autoscaling-options_<opt> = <value>
k8s.io_cluster-autoscaler_node-template_dra-driver                = <driver>
```

`dra-driver` is clusterscaler's (upstream's Azure provider has no DRA tag): the DRA driver
that publishes the VM's GPUs, which are then devices of that driver in the template
(`gpu_template_slices`) instead of the `nvidia.com/gpu` extended resource.

e.g. `k8s.io_cluster-autoscaler_node-template_label_example.com_role=db` gives the label
`example.com/role=db`. Parsing never raises: every bad tag becomes a `TagError` naming the
scale set, the tag and the expected form, so one badly tagged scale set is reported while
the others keep scaling.
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

TEMPLATE_PREFIX = "k8s.io_cluster-autoscaler_node-template_"
LABEL_PREFIX = TEMPLATE_PREFIX + "label_"
TAINT_PREFIX = TEMPLATE_PREFIX + "taint_"
RESOURCES_PREFIX = TEMPLATE_PREFIX + "resources_"
OPTIONS_PREFIX = TEMPLATE_PREFIX + "autoscaling-options_"
DRA_DRIVER_TAG = TEMPLATE_PREFIX + "dra-driver"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class TagError:
    """A tag whose name or value is not of the expected form."""

    vmss: str
    tag: str
    value: str
    expected: str

    def __str__(self) -> str:
        return f"VMSS {self.vmss!r}: tag {self.tag!r}={self.value!r}: expected {self.expected}"


@dataclass(frozen=True, slots=True)
class TemplateTags:
    """What a scale set's tags say about its nodes and options."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    resources: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, str] = field(default_factory=dict)
    # The DRA driver publishing the VM's GPUs, if they are DRA devices.
    dra_driver: str = ""
    errors: tuple[TagError, ...] = ()


def decode_name(encoded: str) -> str:
    """`example.com_role` -> `example.com/role`; `~2` stands for `_`."""
    return encoded.replace("_", "/").replace("~2", "_")


def _strip_prefix(tag: str, prefix: str) -> str | None:
    # Tag names are case-insensitive in Azure; the part after the prefix keeps its case.
    if tag[: len(prefix)].lower() == prefix:
        return tag[len(prefix) :]
    return None


def parse_template_tags(vmss: str, tags: Mapping[str, str]) -> TemplateTags:
    """Split a scale set's tags into labels, taints, resources and options, collecting errors."""
    labels: dict[str, str] = {}
    taints: dict[str, Taint] = {}
    resources: dict[str, str] = {}
    options: dict[str, str] = {}
    dra_driver = ""
    errors: list[TagError] = []
    for tag in sorted(tags):
        value = tags[tag] if tags[tag] is not None else ""
        if (rest := _strip_prefix(tag, LABEL_PREFIX)) is not None:
            name = decode_name(rest)
            if not is_qualified_name(name):
                errors.append(TagError(vmss, tag, value, f"a label key after {LABEL_PREFIX} "
                                       "with '_' for '/', e.g. "
                                       f"{LABEL_PREFIX}example.com_role"))
            elif not is_label_value(value):
                errors.append(TagError(vmss, tag, value, "a label value of at most 63 "
                                       "alphanumerics, '-', '_' or '.', starting and ending "
                                       "alphanumeric"))
            else:
                labels[name] = value
        elif (rest := _strip_prefix(tag, TAINT_PREFIX)) is not None:
            name = decode_name(rest)
            taint_value, sep, effect = value.rpartition(":")
            if not is_qualified_name(name):
                errors.append(TagError(vmss, tag, value, f"a taint key after {TAINT_PREFIX} "
                                       "with '_' for '/', e.g. "
                                       f"{TAINT_PREFIX}dedicated"))
            elif not sep or effect not in TAINT_EFFECTS:
                errors.append(TagError(vmss, tag, value, "<value>:<effect> with effect one of "
                                       f"{', '.join(TAINT_EFFECTS)}, e.g. gpu:NoSchedule"))
            elif not is_label_value(taint_value):
                errors.append(TagError(vmss, tag, value, "a taint value of at most 63 "
                                       "alphanumerics, '-', '_' or '.' before ':<effect>'"))
            else:
                taints[name] = Taint(key=name, value=taint_value, effect=effect)
        elif (rest := _strip_prefix(tag, RESOURCES_PREFIX)) is not None:
            name = decode_name(rest)
            if not is_qualified_name(name):
                errors.append(TagError(vmss, tag, value, f"a resource name after "
                                       f"{RESOURCES_PREFIX} with '_' for '/', e.g. "
                                       f"{RESOURCES_PREFIX}nvidia.com_gpu"))
            else:
                resources[name] = value.strip()
        elif (rest := _strip_prefix(tag, OPTIONS_PREFIX)) is not None and rest:
            options[rest] = value.strip()
        elif tag.lower() == DRA_DRIVER_TAG:
            if is_dra_driver_name(value.strip()):
                dra_driver = value.strip()
            else:
                errors.append(TagError(vmss, tag, value, DRA_DRIVER_FORM))
    return TemplateTags(
        labels=labels,
        taints=tuple(taints[k] for k in sorted(taints)),
        resources=resources,
        options=options,
        dra_driver=dra_driver,
        errors=tuple(errors),
    )


KNOWN_OPTIONS = GROUP_OPTION_NAMES


def parse_node_group_options(
    vmss: str, options: Mapping[str, str]
) -> tuple[NodeGroupOptions | None, tuple[TagError, ...]]:
    """Per-group overrides from `autoscaling-options_<opt>` tags; `None` when none is set.
    A bad or unknown option is reported and ignored, the others still apply."""
    values: dict[str, Any] = {}
    errors: list[TagError] = []
    for name in sorted(options):
        raw = options[name]
        try:
            option, value = parse_group_option(name, raw)
        except GroupOptionError as exc:
            errors.append(TagError(vmss, OPTIONS_PREFIX + name, raw, exc.expected))
            continue
        values[option] = value
    return (NodeGroupOptions(**values) if values else None), tuple(errors)

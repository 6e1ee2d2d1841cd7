"""Cluster Autoscaler's node-template tags, read the same way for every cloud that has them.

A node group's cloud resource (an ASG, a scale set) describes the nodes it makes with tags
under one prefix, each cloud writing them its own way:

```
<prefix>label<sep><key>                = <value>
<prefix>taint<sep><key>                = <value>:<Effect>
<prefix>resources<sep><name>           = <quantity>
<prefix>autoscaling-options<sep><opt>  = <value>
<prefix>dra-driver                     = <driver>
```

A `TagScheme` says how a cloud writes them (prefix, separator, whether tag names ignore
case and encode `/` in keys); `parse_template_tags` splits a group's tags into labels,
taints, resources and options and `parse_tag_options` turns the options into
`NodeGroupOptions`. Parsing never raises: every bad tag becomes a `TemplateTagError`
naming the group, the tag and the expected form, so that one badly tagged group is
reported while the others keep scaling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.framework.groupoptions import GroupOptionError, parse_group_option
from clusterscaler.framework.templatedevices import DRA_DRIVER_FORM, is_dra_driver_name
from clusterscaler.interfaces.cloudprovider import ConfigurationError, NodeGroupOptions
from clusterscaler.model import (
    TAINT_EFFECTS,
    ModelError,
    Resources,
    Taint,
    is_label_value,
    is_qualified_name,
)

LABEL_VALUE_FORM = (
    "a label value of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
)
TAINT_EFFECT_FORM = f"<value>:<effect> with effect one of {', '.join(TAINT_EFFECTS)}, e.g. gpu:NoSchedule"
TAINT_VALUE_FORM = "a taint value of at most 63 alphanumerics, '-', '_' or '.' before ':<effect>'"


@dataclass(frozen=True, slots=True)
class TagScheme:
    """How one cloud writes the node-template tags.

    `prefix` comes before every tag (`k8s.io/cluster-autoscaler/node-template/`) and
    `separator` between a tag's kind and its key (`/`, or `_` where `/` is not allowed).
    With `encoded_keys`, a key writes `/` as `_` and `_` as `~2` (`example.com_role`).
    With `ignore_case`, tag names match whatever their case (the key keeps its own). The
    three `*_form` texts name the expected form of a bad label key, taint key and
    resource name in errors.
    """

    prefix: str
    separator: str
    label_key_form: str
    taint_key_form: str
    resource_name_form: str
    encoded_keys: bool = False
    ignore_case: bool = False

    @property
    def label_prefix(self) -> str:
        return f"{self.prefix}label{self.separator}"

    @property
    def taint_prefix(self) -> str:
        return f"{self.prefix}taint{self.separator}"

    @property
    def resources_prefix(self) -> str:
        return f"{self.prefix}resources{self.separator}"

    @property
    def options_prefix(self) -> str:
        return f"{self.prefix}autoscaling-options{self.separator}"

    @property
    def dra_driver_tag(self) -> str:
        return f"{self.prefix}dra-driver"

    def after(self, tag: str, prefix: str) -> str | None:
        """What follows `prefix` in `tag`, or None when `tag` does not start with it."""
        head = tag[: len(prefix)]
        if head == prefix or (self.ignore_case and head.lower() == prefix.lower()):
            return tag[len(prefix) :]
        return None

    def key(self, written: str) -> str:
        """The Kubernetes key a tag's tail stands for."""
        if self.encoded_keys:
            return written.replace("_", "/").replace("~2", "_")
        return written

    def written(self, key: str) -> str:
        """How a tag's tail writes the Kubernetes key `key` (the inverse of `key()`)."""
        if self.encoded_keys:
            return key.replace("_", "~2").replace("/", "_")
        return key


@dataclass(frozen=True, slots=True)
class TemplateTagError:
    """A tag whose key or value is not of the expected form: of the group `group`, a
    resource its cloud calls `kind` (`ASG`, `VMSS`)."""

    kind: str
    group: str
    tag: str
    value: str
    expected: str

    def __str__(self) -> str:
        return f"{self.kind} {self.group!r}: tag {self.tag!r}={self.value!r}: expected {self.expected}"


@dataclass(frozen=True, slots=True)
class TemplateTags:
    """What a group's tags say about its nodes and options."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # Raw quantities by resource name; turned into numbers when the template is built.
    resources: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, str] = field(default_factory=dict)
    # The DRA driver publishing the nodes' GPUs, if they are DRA devices.
    dra_driver: str = ""
    errors: tuple[TemplateTagError, ...] = ()


def parse_template_tags(
    kind: str, group: str, tags: Mapping[str, str | None], scheme: TagScheme
) -> TemplateTags:
    """Split the tags of `group` (a `kind` of its cloud) into labels, taints, resources and
    options, collecting errors; tags of other prefixes are left alone."""
    labels: dict[str, str] = {}
    taints: dict[str, Taint] = {}
    resources: dict[str, str] = {}
    options: dict[str, str] = {}
    dra_driver = ""
    errors: list[TemplateTagError] = []

    def bad(tag: str, value: str, expected: str) -> None:
        errors.append(TemplateTagError(kind, group, tag, value, expected))

    for tag in sorted(tags):
        value = tags[tag] or ""
        if (rest := scheme.after(tag, scheme.label_prefix)) is not None:
            name = scheme.key(rest)
            if not is_qualified_name(name):
                bad(tag, value, scheme.label_key_form)
            elif not is_label_value(value):
                bad(tag, value, LABEL_VALUE_FORM)
            else:
                labels[name] = value
        elif (rest := scheme.after(tag, scheme.taint_prefix)) is not None:
            name = scheme.key(rest)
            taint_value, sep, effect = value.rpartition(":")
            if not is_qualified_name(name):
                bad(tag, value, scheme.taint_key_form)
            elif not sep or effect not in TAINT_EFFECTS:
                bad(tag, value, TAINT_EFFECT_FORM)
            elif not is_label_value(taint_value):
                bad(tag, value, TAINT_VALUE_FORM)
            else:
                taints[name] = Taint(key=name, value=taint_value, effect=effect)
        elif (rest := scheme.after(tag, scheme.resources_prefix)) is not None:
            name = scheme.key(rest)
            if not is_qualified_name(name):
                bad(tag, value, scheme.resource_name_form)
            else:
                resources[name] = value.strip()
        elif (rest := scheme.after(tag, scheme.options_prefix)) is not None:
            if rest:
                options[rest] = value.strip()
        elif scheme.after(tag, scheme.dra_driver_tag) == "":
            if is_dra_driver_name(value.strip()):
                dra_driver = value.strip()
            else:
                bad(tag, value, DRA_DRIVER_FORM)
    return TemplateTags(
        labels=labels,
        taints=tuple(taints[k] for k in sorted(taints)),
        resources=resources,
        options=options,
        dra_driver=dra_driver,
        errors=tuple(errors),
    )


def tag_capacity(
    kind: str, group: str, quantities: Mapping[str, str], scheme: TagScheme
) -> Resources:
    """The capacity of the template of `group` (a `kind` of its cloud) from `quantities` by
    resource name: what the cloud says of its machines, with the group's `resources` tags
    on top. Raises `ConfigurationError` naming the group and the resources tag of a
    quantity that is not one."""
    field = "template capacity"
    try:
        return Resources.from_k8s(dict(quantities), obj=f"{kind} {group}", field=field)
    except ModelError as exc:
        resource = exc.field.removeprefix(field + ".")
        tag = scheme.resources_prefix + scheme.written(resource)
        error = TemplateTagError(kind, group, tag, quantities.get(resource, ""), exc.expected)
        raise ConfigurationError(str(error)) from None


def parse_tag_options(
    kind: str, group: str, options: Mapping[str, str], prefix: str
) -> tuple[NodeGroupOptions | None, tuple[TemplateTagError, ...]]:
    """Per-group overrides from `<prefix><opt>` tags (`options` by `<opt>`); `None` when no
    option is set. A bad or unknown option is reported and ignored, the others still apply."""
    values: dict[str, Any] = {}
    errors: list[TemplateTagError] = []
    for name in sorted(options):
        raw = options[name]
        try:
            option, value = parse_group_option(name, raw)
        except GroupOptionError as exc:
            errors.append(TemplateTagError(kind, group, prefix + name, raw, exc.expected))
            continue
        values[option] = value
    return (NodeGroupOptions(**values) if values else None), tuple(errors)

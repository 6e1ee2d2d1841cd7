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
`example.com/role=db`. The tags are read by the provider kit (`parse_template_tags` of `clusterscaler.api`) with
the Azure spelling below. Parsing never raises: every bad tag becomes a `TemplateTagError`
naming the scale set, the tag and the expected form, so one badly tagged scale set is reported while
the others keep scaling.
"""

from __future__ import annotations

from collections.abc import Mapping

from clusterscaler.api import (
    NodeGroupOptions,
    TagScheme,
    TemplateTagError,
    TemplateTags,
    parse_tag_options,
)
from clusterscaler.api import parse_template_tags as parse_tags

TEMPLATE_PREFIX = "k8s.io_cluster-autoscaler_node-template_"
SCHEME = TagScheme(
    prefix=TEMPLATE_PREFIX,
    separator="_",
    label_key_form=(
        f"a label key after {TEMPLATE_PREFIX}label_ with '_' for '/', e.g. "
        f"{TEMPLATE_PREFIX}label_example.com_role"
    ),
    taint_key_form=(
        f"a taint key after {TEMPLATE_PREFIX}taint_ with '_' for '/', e.g. "
        f"{TEMPLATE_PREFIX}taint_dedicated"
    ),
    resource_name_form=(
        f"a resource name after {TEMPLATE_PREFIX}resources_ with '_' for '/', e.g. "
        f"{TEMPLATE_PREFIX}resources_nvidia.com_gpu"
    ),
    encoded_keys=True,
    # Tag names are case-insensitive in Azure; the part after the prefix keeps its case.
    ignore_case=True,
)
RESOURCES_PREFIX = SCHEME.resources_prefix
DRA_DRIVER_TAG = SCHEME.dra_driver_tag


def parse_template_tags(vmss: str, tags: Mapping[str, str]) -> TemplateTags:
    """Split a scale set's tags into labels, taints, resources and options, collecting errors."""
    return parse_tags("VMSS", vmss, tags, SCHEME)


def parse_node_group_options(
    vmss: str, options: Mapping[str, str]
) -> tuple[NodeGroupOptions | None, tuple[TemplateTagError, ...]]:
    """Per-group overrides from `autoscaling-options_<opt>` tags; `None` when none is set.
    A bad or unknown option is reported and ignored, the others still apply."""
    return parse_tag_options("VMSS", vmss, options, SCHEME.options_prefix)

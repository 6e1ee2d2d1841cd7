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

The tags are read by the provider kit (`parse_template_tags` of `clusterscaler.api`) with
the AWS spelling below; EKS's own tags on a managed node group's ASG are added here. Parsing
never raises: every bad tag becomes a `TemplateTagError` naming the ASG, the tag and the
expected form, so that one badly tagged ASG is reported while the others keep scaling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from clusterscaler.api import (
    NodeGroupOptions,
    TagScheme,
    TemplateTagError,
    TemplateTags,
    parse_tag_options,
)
from clusterscaler.api import parse_template_tags as parse_tags

TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
SCHEME = TagScheme(
    prefix=TEMPLATE_PREFIX,
    separator="/",
    label_key_form=f"a label key such as example.com/role after {TEMPLATE_PREFIX}label/",
    taint_key_form=f"a taint key such as dedicated after {TEMPLATE_PREFIX}taint/",
    resource_name_form=(
        f"a resource name such as ephemeral-storage or nvidia.com/gpu after {TEMPLATE_PREFIX}resources/"
    ),
)
RESOURCES_PREFIX = SCHEME.resources_prefix
DRA_DRIVER_TAG = SCHEME.dra_driver_tag
# Tags EKS puts on the ASGs of managed node groups.
EKS_CLUSTER_TAG = "eks:cluster-name"
EKS_NODEGROUP_TAG = "eks:nodegroup-name"


@dataclass(frozen=True, slots=True)
class AsgTemplateTags(TemplateTags):
    """What an ASG's tags say about its nodes and options, and the EKS managed node group
    it belongs to, if any."""

    eks_cluster: str = ""
    eks_nodegroup: str = ""


def parse_template_tags(asg: str, tags: Mapping[str, str]) -> AsgTemplateTags:
    """Split an ASG's tags into labels, taints, resources and options, collecting errors."""
    parsed = parse_tags("ASG", asg, tags, SCHEME)
    return AsgTemplateTags(
        **{f.name: getattr(parsed, f.name) for f in dataclasses.fields(parsed)},
        eks_cluster=tags.get(EKS_CLUSTER_TAG, ""),
        eks_nodegroup=tags.get(EKS_NODEGROUP_TAG, ""),
    )


def parse_node_group_options(
    asg: str, options: Mapping[str, str]
) -> tuple[NodeGroupOptions | None, tuple[TemplateTagError, ...]]:
    """Per-group overrides from `autoscaling-options/<opt>` tags.

    Returns `None` when no option is set. An unparsable or unknown option is reported and
    ignored, the others still apply.
    """
    return parse_tag_options("ASG", asg, options, SCHEME.options_prefix)

"""The public API of clusterscaler for plugin and cloud-provider authors.

Everything a plugin needs is importable from here, typed, with a docstring at its
definition: the hook markers and the registry the registration hooks receive, the
cloud-provider protocols and the values they exchange, the slim model objects, the
expander, estimator, pod-filter and pod-list-processor interfaces, the autoscaler's taint names, and the
parsers of Go-style durations and Kubernetes quantities that flags, tags and annotations
use. The interfaces live together in `clusterscaler.interfaces`; the other modules behind
these names are internal and may move; this module does not.

Example: a cloud provider distribution declares an entry point in the ``clusterscaler``
group and implements ``clusterscaler_register_cloud_providers``::

    from clusterscaler.api import CloudProvider, ProviderContext, Registry, hookimpl

    @hookimpl
    def clusterscaler_register_cloud_providers(registry: Registry) -> None:
        registry.add_cloud_provider("mycloud", MyCloudProvider.from_context)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterscaler import ENTRY_POINT_GROUP
from clusterscaler.framework.cachedgroups import CachedNodeGroup, GroupIndex, NodeGroupMemo
from clusterscaler.framework.cloudconfigfile import config_mapping, read_cloud_config
from clusterscaler.framework.durations import DURATION_FORM, parse_duration
from clusterscaler.framework.groupoptions import (
    GROUP_OPTION_NAMES,
    GroupOptionError,
    parse_group_option,
)
from clusterscaler.framework.keyvalues import KeyValueError, parse_key_values
from clusterscaler.framework.nodespecs import (
    NodeGroupFlags,
    NodeGroupSpec,
    check_nodes_limits,
    discovery_params,
    ignored_node_group_flags,
    node_group_flags,
    parse_nodes_spec,
    parse_nodes_specs,
)
from clusterscaler.framework.options import BOOL, AutoscalingOptions, BoolFlag, add_bool_flag
from clusterscaler.framework.providerdefaults import ProviderDefaults, problems_by_group
from clusterscaler.framework.providerhook import cloud_provider_hook
from clusterscaler.framework.templatedevices import (
    DRA_DRIVER_FORM,
    GPU_DEVICE_TYPE,
    MAX_SLICE_DEVICES,
    gpu_template_slices,
    is_dra_driver_name,
)
from clusterscaler.framework.templatenodes import (
    KUBELET_MAX_PODS,
    MachineShape,
    gpus_as_devices,
    template_node_info,
)
from clusterscaler.framework.templatetags import (
    TagScheme,
    TemplateTagError,
    TemplateTags,
    parse_tag_options,
    parse_template_tags,
    tag_capacity,
)
from clusterscaler.framework.ttlcache import TtlCache
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
    ForceDeletingNodeGroup,
    GroupRecord,
    Instance,
    InstanceCreationError,
    InstanceErrorClass,
    InstanceErrorInfo,
    InstanceState,
    NodeGroup,
    NodeGroupNotFoundError,
    NodeGroupOptions,
    PricingModel,
    ProviderProblem,
    ResourceLimiter,
    ScaleDownBlockingNodeGroup,
    checked_delete,
    checked_increase,
)
from clusterscaler.interfaces.clusterview import Clock, ClusterSource
from clusterscaler.interfaces.estimator import Estimate, EstimationLimiter, Estimator
from clusterscaler.interfaces.expander import (
    Expander,
    ExpanderContext,
    Option,
    debug_with,
    options_by_score,
)
from clusterscaler.interfaces.hookspecs import hookimpl
from clusterscaler.interfaces.podfilter import (
    SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
    SAFE_TO_EVICT_ON_COMPLETION,
    BlockingPodReason,
    DrainContext,
    DrainDecision,
    DrainOutcome,
    PodFilter,
)
from clusterscaler.interfaces.podlistprocessor import PodListContext, PodListProcessor
from clusterscaler.interfaces.providercontext import KubeApiClient, ProviderContext
from clusterscaler.interfaces.registry import (
    CloudProviderFactory,
    EstimatorFactory,
    ExpanderFactory,
    OptionsCheck,
    PodFilterFactory,
    PodListProcessorFactory,
    Registered,
    Registry,
)
from clusterscaler.loop.capacitybuffers import capacity_buffer_pods
from clusterscaler.loop.provreq import provisioning_request_consumers
from clusterscaler.loop.taints import (
    DELETION_CANDIDATE_TAINT,
    NODE_CONDITION_TAINTS,
    TO_BE_DELETED_TAINT,
    TaintConfig,
)
from clusterscaler.model import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    POD_SLOT,
    TAINT_EFFECTS,
    ModelError,
    Node,
    NodeCondition,
    NodeInfo,
    Pod,
    Resources,
    Taint,
    Toleration,
    is_label_value,
    is_qualified_name,
    parse_node,
    parse_pod,
)
from clusterscaler.model.common import JsonObject, JsonValue, describe_value
from clusterscaler.model.dra import ResourceSlice, parse_resource_slice, parse_template_slice
from clusterscaler.model.quantity import (
    QuantityError,
    parse_cpu_millis,
    parse_int_quantity,
    parse_quantity,
)
from clusterscaler.model.yamltext import (
    MAX_CONFIG_FILE_BYTES,
    YAMLBoundError,
    YamlFileError,
    YamlScalar,
    YamlValue,
    load_yaml,
    load_yaml_documents,
    read_file_bytes,
    read_yaml_file,
)
from clusterscaler.simulator.equivalence import PodGroup
from clusterscaler.simulator.predicates import (
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    REASON_NODE_AFFINITY,
    REASON_NODE_NAME,
    REASON_PORTS,
    REASON_TOO_MANY_PODS,
    REASON_UNSCHEDULABLE,
    check_predicates,
    pod_affinity_cannot_reject,
    prepare_indexes,
    selected_by_existing_anti_affinity,
    spread_cannot_reject,
    volumes_constrain_scheduling,
)
from clusterscaler.simulator.snapshot import ClusterSnapshot, SimNodeInfo
from clusterscaler.simulator.templatecopier import TemplateCopier

__all__ = [
    "BOOL",
    "DELETION_CANDIDATE_TAINT",
    "DRA_DRIVER_FORM",
    "DURATION_FORM",
    "ENTRY_POINT_GROUP",
    "GPU_DEVICE_TYPE",
    "GPU_RESOURCE",
    "GROUP_OPTION_NAMES",
    "HOSTNAME_LABEL",
    "KUBELET_MAX_PODS",
    "MAX_CONFIG_FILE_BYTES",
    "MAX_SLICE_DEVICES",
    "NODE_CONDITION_TAINTS",
    "POD_SLOT",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "REASON_NODE_AFFINITY",
    "REASON_NODE_NAME",
    "REASON_PORTS",
    "REASON_TOO_MANY_PODS",
    "REASON_UNSCHEDULABLE",
    "SAFE_TO_EVICT_ANNOTATION",
    "SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION",
    "SAFE_TO_EVICT_ON_COMPLETION",
    "TAINT_EFFECTS",
    "TO_BE_DELETED_TAINT",
    "AutoscalingOptions",
    "BlockingPodReason",
    "BoolFlag",
    "CachedNodeGroup",
    "Clock",
    "CloudProvider",
    "CloudProviderError",
    "CloudProviderFactory",
    "ClusterSnapshot",
    "ClusterSource",
    "ConfigurationError",
    "DrainContext",
    "DrainDecision",
    "DrainOutcome",
    "Estimate",
    "EstimationLimiter",
    "Estimator",
    "EstimatorFactory",
    "Expander",
    "ExpanderContext",
    "ExpanderFactory",
    "ForceDeletingNodeGroup",
    "GroupIndex",
    "GroupOptionError",
    "GroupRecord",
    "Informer",
    "Instance",
    "InstanceCreationError",
    "InstanceErrorClass",
    "InstanceErrorInfo",
    "InstanceState",
    "JsonObject",
    "JsonValue",
    "KeyValueError",
    "KubeApiClient",
    "KubeClientSettings",
    "KubeConfigError",
    "ListerSpec",
    "MachineShape",
    "ModelError",
    "Node",
    "NodeCondition",
    "NodeGroup",
    "NodeGroupFlags",
    "NodeGroupMemo",
    "NodeGroupNotFoundError",
    "NodeGroupOptions",
    "NodeGroupSpec",
    "NodeInfo",
    "Option",
    "OptionsCheck",
    "Pod",
    "PodFilter",
    "PodFilterFactory",
    "PodGroup",
    "PodListContext",
    "PodListProcessor",
    "PodListProcessorFactory",
    "PricingModel",
    "ProviderContext",
    "ProviderDefaults",
    "ProviderProblem",
    "QuantityError",
    "Registered",
    "Registry",
    "ResourceLimiter",
    "ResourceSlice",
    "Resources",
    "ScaleDownBlockingNodeGroup",
    "SimNodeInfo",
    "TagScheme",
    "Taint",
    "TaintConfig",
    "TemplateCopier",
    "TemplateTagError",
    "TemplateTags",
    "Toleration",
    "TtlCache",
    "YAMLBoundError",
    "YamlFileError",
    "YamlScalar",
    "YamlValue",
    "add_bool_flag",
    "build_kube_api_client",
    "capacity_buffer_pods",
    "check_nodes_limits",
    "check_predicates",
    "checked_delete",
    "checked_increase",
    "cloud_provider_hook",
    "config_mapping",
    "debug_with",
    "describe_value",
    "discovery_params",
    "gpu_template_slices",
    "gpus_as_devices",
    "hookimpl",
    "ignored_node_group_flags",
    "is_dra_driver_name",
    "is_label_value",
    "is_qualified_name",
    "kube_proto",
    "load_yaml",
    "load_yaml_documents",
    "node_group_flags",
    "options_by_score",
    "parse_cpu_millis",
    "parse_duration",
    "parse_group_option",
    "parse_int_quantity",
    "parse_key_values",
    "parse_node",
    "parse_nodes_spec",
    "parse_nodes_specs",
    "parse_pod",
    "parse_quantity",
    "parse_resource_slice",
    "parse_tag_options",
    "parse_template_slice",
    "parse_template_tags",
    "pod_affinity_cannot_reject",
    "prepare_indexes",
    "problems_by_group",
    "provisioning_request_consumers",
    "read_cloud_config",
    "read_file_bytes",
    "read_yaml_file",
    "selected_by_existing_anti_affinity",
    "spread_cannot_reject",
    "tag_capacity",
    "template_node_info",
    "volumes_constrain_scheduling",
    "wait_all",
]


# The Kubernetes caches, for providers that keep their state in Kubernetes objects (the
# Machine API): imported on first use, so that loading a plugin does not load the
# kubernetes client.
_KUBE_CACHES = {"Informer", "ListerSpec", "wait_all"}

if TYPE_CHECKING:
    from clusterscaler.kube.informer import Informer, ListerSpec, wait_all


# A Kubernetes client of its own, for providers that read another cluster (the Machine API
# objects of a separate management cluster): also imported on first use.
_KUBE_CLIENT = {
    "KubeClientSettings": "ClientSettings",
    "KubeConfigError": "KubeConfigError",
    "build_kube_api_client": "build_api_client",
}

if TYPE_CHECKING:
    from clusterscaler.kube.client import ClientSettings as KubeClientSettings
    from clusterscaler.kube.client import KubeConfigError
    from clusterscaler.kube.client import build_api_client as build_kube_api_client


# Kubernetes objects in their protobuf encoding and the building of gRPC protocols' message
# classes at run time, for plugins that speak Cluster Autoscaler's gRPC protocols (the gRPC
# expander, the externalgrpc provider): imported on first use, so that loading a plugin
# does not load protobuf.
if TYPE_CHECKING:
    from clusterscaler.model import kubeproto as kube_proto


def __getattr__(name: str) -> object:
    if name == "kube_proto":
        from clusterscaler.model import kubeproto

        return kubeproto
    if name in _KUBE_CACHES:
        from clusterscaler.kube import informer

        return getattr(informer, name)
    if name in _KUBE_CLIENT:
        from clusterscaler.kube import client

        return getattr(client, _KUBE_CLIENT[name])
    raise AttributeError(f"module 'clusterscaler.api' has no attribute {name!r}")

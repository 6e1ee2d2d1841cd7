"""The public API of clusterscaler for plugin and cloud-provider authors.

Everything a plugin needs is importable from here, typed, with a docstring at its
definition: the hook markers and the registry the registration hooks receive, the
cloud-provider protocols and the values they exchange, the slim model objects, the
expander, estimator and pod-filter interfaces, the autoscaler's taint names, and the
parsers of Go-style durations and Kubernetes quantities that flags, tags and annotations
use. The modules behind these names are internal and may move; this module does not.

Example: a cloud provider distribution declares an entry point in the ``clusterscaler``
group and implements ``clusterscaler_register_cloud_providers``::

    from clusterscaler.api import CloudProvider, ProviderContext, Registry, hookimpl

    @hookimpl
    def clusterscaler_register_cloud_providers(registry: Registry) -> None:
        registry.add_cloud_provider("mycloud", MyCloudProvider.from_context)
"""

from __future__ import annotations

from clusterscaler import ENTRY_POINT_GROUP, hookimpl
from clusterscaler.framework.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
    Instance,
    InstanceErrorClass,
    InstanceErrorInfo,
    InstanceState,
    NodeGroup,
    NodeGroupNotFoundError,
    NodeGroupOptions,
    PricingModel,
    ProviderContext,
    ProviderProblem,
    ResourceLimiter,
)
from clusterscaler.framework.durations import DURATION_FORM, parse_duration
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import Registry
from clusterscaler.loop.clusterstate import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from clusterscaler.loop.estimator import Estimate, EstimationLimiter, Estimator
from clusterscaler.loop.expander import Expander, ExpanderContext, Option, options_by_score
from clusterscaler.model import (
    HOSTNAME_LABEL,
    ModelError,
    Node,
    NodeCondition,
    NodeInfo,
    Pod,
    Resources,
    Taint,
    Toleration,
    parse_node,
    parse_pod,
)
from clusterscaler.model.quantity import (
    QuantityError,
    parse_cpu_millis,
    parse_int_quantity,
    parse_quantity,
)
from clusterscaler.simulator.drain import DrainContext, DrainDecision, DrainOutcome, PodFilter

__all__ = [
    "DELETION_CANDIDATE_TAINT",
    "DURATION_FORM",
    "ENTRY_POINT_GROUP",
    "HOSTNAME_LABEL",
    "TO_BE_DELETED_TAINT",
    "AutoscalingOptions",
    "CloudProvider",
    "CloudProviderError",
    "ConfigurationError",
    "DrainContext",
    "DrainDecision",
    "DrainOutcome",
    "Estimate",
    "EstimationLimiter",
    "Estimator",
    "Expander",
    "ExpanderContext",
    "Instance",
    "InstanceErrorClass",
    "InstanceErrorInfo",
    "InstanceState",
    "ModelError",
    "Node",
    "NodeCondition",
    "NodeGroup",
    "NodeGroupNotFoundError",
    "NodeGroupOptions",
    "NodeInfo",
    "Option",
    "Pod",
    "PodFilter",
    "PricingModel",
    "ProviderContext",
    "ProviderProblem",
    "QuantityError",
    "Registry",
    "ResourceLimiter",
    "Resources",
    "Taint",
    "Toleration",
    "hookimpl",
    "options_by_score",
    "parse_cpu_millis",
    "parse_duration",
    "parse_int_quantity",
    "parse_node",
    "parse_pod",
    "parse_quantity",
]

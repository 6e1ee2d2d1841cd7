"""The `aws` cloud provider: Auto Scaling groups as node groups.

Scaling goes through SetDesiredCapacity (HonorCooldown=false) and
TerminateInstanceInAutoScalingGroup (ShouldDecrementDesiredCapacity=true). The limits are
enforced here before any call: AWS rejects a desired capacity outside the ASG's own limits,
but the limits that matter for `--nodes` groups are the flag's, and test doubles enforce none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog
from clusterscaler.api import (
    CachedNodeGroup,
    CloudProviderError,
    ConfigurationError,
    Instance,
    NodeGroupMemo,
    NodeGroupOptions,
    ProviderDefaults,
    ProviderProblem,
    TtlCache,
    checked_delete,
    checked_increase,
    problems_by_group,
)

from clusterscaler_aws import PROVIDER_NAME
from clusterscaler_aws.asg_cache import (
    AsgCache,
    AsgRecord,
    instance_id_of,
    is_placeholder,
    is_terminating,
)
from clusterscaler_aws.cloud_config import zone_to_region
from clusterscaler_aws.instance_types import InstanceTypeCatalogue, InstanceTypeInfo
from clusterscaler_aws.service import (
    AsgDescription,
    AwsService,
    InstanceRequirements,
    LaunchTemplateData,
    LaunchTemplateRef,
    ManagedNodegroup,
)
from clusterscaler_aws.template import TemplateInput, build_template_node_info

if TYPE_CHECKING:
    from clusterscaler.api import Node, NodeInfo

log = structlog.get_logger()

GPU_LABEL = "k8s.amazonaws.com/accelerator"
PROVIDER_ID_PREFIX = "aws://"
# How long answers that can change under us (launch template `$Latest`, EKS node group
# labels) are reused.
LOOKUP_TTL = 600.0
# "Does this instance still exist" is reused for less long: a stale yes delays the removal
# of a node whose instance is gone.
INSTANCE_TTL = 60.0


class AwsNodeGroup(CachedNodeGroup[AsgRecord]):
    """One ASG. Reads go through the provider's cache; writes call AWS and update it."""

    def __init__(self, provider: AwsCloudProvider, name: str) -> None:
        self._provider = provider
        self._name = name

    def lookup(self) -> AsgRecord | None:
        return self._provider.cache.get(self._name)

    def describe(self) -> str:
        return f"ASG {self._name!r}"

    @property
    def id(self) -> str:
        return self._name

    def target_size(self) -> int:
        return self.record().desired

    def increase_size(self, delta: int) -> None:
        record = self.record()
        new_size = checked_increase(f"ASG {self._name!r}", record.desired, delta, record.max_size)
        self._provider.service.set_desired_capacity(self._name, new_size)
        self._provider.cache.set_desired(self._name, new_size)
        log.info("aws_scale_up", node_group=self._name, delta=delta, desired=new_size)

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        record = self.record()
        desc = record.description
        by_id = {inst.instance_id: inst for inst in desc.instances}
        real: list[str] = []
        placeholders: list[str] = []
        for node in nodes:
            instance_id = instance_id_of(node.provider_id) if node.provider_id else ""
            if is_placeholder(instance_id) and instance_id.startswith(f"i-placeholder-{self._name}-"):
                placeholders.append(instance_id)
                continue
            if instance_id not in by_id:
                raise CloudProviderError(
                    f"ASG {self._name!r}: node {node.name!r} (providerID {node.provider_id!r}) "
                    "does not belong to this ASG"
                )
            if not is_terminating(by_id[instance_id].lifecycle_state):
                real.append(instance_id)
        desired = record.desired
        if placeholders:
            # Instances that never launched: shrink the desired capacity to what exists,
            # never below min.
            desired = max(record.live_instance_count(), record.min_size)
        checked_delete(f"ASG {self._name!r}", desired, len(real), record.min_size)
        if desired != record.desired:
            self._provider.service.set_desired_capacity(self._name, desired)
            self._provider.cache.set_desired(self._name, desired)
        try:
            for instance_id in real:
                self._provider.service.terminate_instance(self._name, instance_id)
                desired -= 1
                self._provider.cache.mark_terminating(self._name, instance_id, desired)
                log.info(
                    "aws_instance_terminated",
                    node_group=self._name,
                    instance=instance_id,
                    desired=desired,
                )
        finally:
            # The next loop must see the instances as AWS now reports them, also after a
            # failure part-way.
            self._provider.cache.invalidate()

    def decrease_target_size(self, delta: int) -> None:
        if delta >= 0:
            raise ValueError(f"ASG {self._name!r}: decrease_target_size delta must be negative, got {delta}")
        record = self.record()
        new_size = record.desired + delta
        existing = record.live_instance_count()
        if new_size < existing:
            raise CloudProviderError(
                f"ASG {self._name!r}: cannot decrease the target to {new_size}: "
                f"{existing} instance(s) exist and only requested capacity can be cancelled "
                f"({record.desired - existing} placeholder(s))"
            )
        if new_size < record.min_size:
            raise CloudProviderError(
                f"ASG {self._name!r}: cannot decrease the target to {new_size}, below min {record.min_size}"
            )
        self._provider.service.set_desired_capacity(self._name, new_size)
        self._provider.cache.set_desired(self._name, new_size)
        log.info("aws_decrease_target_size", node_group=self._name, delta=delta, desired=new_size)

    def nodes(self) -> Sequence[Instance]:
        return self.record().instances

    def template_node_info(self) -> NodeInfo:
        record = self.record()
        if record.template_tags.errors:
            # Bad tags would give a wrong template; refusing makes the autoscaler skip this
            # ASG for scale-from-zero instead of launching nodes pods cannot use.
            raise ConfigurationError("; ".join(str(e) for e in record.template_tags.errors))
        desc = record.description
        zone = desc.zones[0]
        data = TemplateInput(
            asg=self._name,
            instance_type=self._provider.instance_type_for(desc),
            zone=zone,
            region=zone_to_region(zone),
            tags=record.template_tags,
            managed_nodegroup=self._provider.managed_nodegroup_for(record),
        )
        return build_template_node_info(data)

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        # Only the overrides of the tags: the core lays them over the flags.
        return self.record().options

    def debug_problems(self, record: AsgRecord) -> Sequence[object]:
        return record.errors


class AwsCloudProvider(ProviderDefaults):
    """Auto Scaling groups found by `--nodes` and `--node-group-auto-discovery=asg:tag=`."""

    PROVIDER_NAME = PROVIDER_NAME
    GPU_LABEL = GPU_LABEL

    def __init__(
        self,
        service: AwsService,
        cache: AsgCache,
        catalogue: InstanceTypeCatalogue,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.cache = cache
        self.catalogue = catalogue
        self._launch_configs: TtlCache[str] = TtlCache(LOOKUP_TTL, clock)
        self._launch_templates: TtlCache[LaunchTemplateData] = TtlCache(LOOKUP_TTL, clock)
        self._nodegroups: TtlCache[ManagedNodegroup] = TtlCache(LOOKUP_TTL, clock)
        self._instances: TtlCache[bool] = TtlCache(INSTANCE_TTL, clock)
        self._groups: NodeGroupMemo[str, AwsNodeGroup] = NodeGroupMemo(lambda name: AwsNodeGroup(self, name))

    def node_groups(self) -> Sequence[AwsNodeGroup]:
        return [self._group(record.name) for record in self.cache.records()]

    def _group(self, name: str) -> AwsNodeGroup:
        return self._groups.get(name)

    def node_group_for_node(self, node: Node) -> AwsNodeGroup | None:
        if not node.provider_id.startswith(PROVIDER_ID_PREFIX):
            return None
        name = self.cache.asg_for_instance(node.provider_id)
        return None if name is None else self._group(name)

    def has_instance(self, node: Node) -> bool:
        if not node.provider_id.startswith(PROVIDER_ID_PREFIX):
            # Not an EC2 instance (e.g. Fargate, or no providerID yet): never claim it is gone.
            return True
        if self.cache.asg_for_instance(node.provider_id) is not None:
            return True
        instance_id = instance_id_of(node.provider_id)
        if is_placeholder(instance_id):
            # A placeholder no longer listed: its requested capacity was cancelled.
            return False
        return self._instances.get_or(instance_id, lambda: self.service.instance_exists(instance_id))

    def refresh(self) -> None:
        self.cache.refresh()

    def cleanup(self) -> None:
        self._groups.clear()

    def errors(self) -> dict[str, tuple[str, ...]]:
        """Problems per ASG found at the last refresh (bad tags, missing ASGs, ...)."""
        return dict(self.cache.errors())

    def problems(self) -> list[ProviderProblem]:
        """The same problems in the core's shape, for the status ConfigMap and `explain`."""
        return problems_by_group(self.errors(), "InvalidAutoScalingGroup")

    # --- template inputs -------------------------------------------------------------------

    def instance_source(self, desc: AsgDescription) -> str | InstanceRequirements:
        """The instance type new instances of `desc` get, or the requirements they meet."""
        if desc.mixed_instance_types:
            return desc.mixed_instance_types[0]
        if desc.mixed_requirements is not None:
            return desc.mixed_requirements
        if desc.mixed_launch_template is not None:
            return self._from_launch_template(desc.mixed_launch_template)
        if desc.launch_configuration:
            name = desc.launch_configuration
            return self._launch_configs.get_or(
                name, lambda: self.service.launch_configuration_instance_type(name)
            )
        if desc.launch_template is not None:
            return self._from_launch_template(desc.launch_template)
        raise ConfigurationError(
            f"ASG {desc.name!r} has neither a launch configuration, a launch template nor a "
            "mixed instances policy"
        )

    def _from_launch_template(self, ref: LaunchTemplateRef) -> str | InstanceRequirements:
        data = self._launch_templates.get_or(ref, lambda: self.service.launch_template_data(ref))
        if not data.instance_type and data.requirements is not None:
            return data.requirements
        return data.instance_type

    def instance_type_for(self, desc: AsgDescription) -> InstanceTypeInfo:
        source = self.instance_source(desc)
        if isinstance(source, InstanceRequirements):
            if source.vcpu_min <= 0 or source.memory_mib_min <= 0:
                raise ConfigurationError(
                    f"ASG {desc.name!r}: instance requirements without minimums; expected "
                    "VCpuCount.Min and MemoryMiB.Min above 0"
                )
            # Any matching type has at least the minimums; the architecture comes from the
            # AMI, not the requirements, so amd64 is assumed unless a label tag says otherwise.
            return InstanceTypeInfo(
                name="",
                vcpu=source.vcpu_min,
                memory_mib=source.memory_mib_min,
                gpu=source.nvidia_gpu_min,
                architecture="amd64",
            )
        if not source:
            raise ConfigurationError(
                f"ASG {desc.name!r}: its launch configuration or template sets no instance type; "
                "expected InstanceType (or a mixed instances policy override)"
            )
        info = self.catalogue.get(source)
        if info is None:
            raise CloudProviderError(f"ASG {desc.name!r} uses the unknown EC2 instance type {source!r}")
        return info

    def managed_nodegroup_for(self, record: AsgRecord) -> ManagedNodegroup | None:
        tags = record.template_tags
        if not tags.eks_cluster or not tags.eks_nodegroup:
            return None
        key = (tags.eks_cluster, tags.eks_nodegroup)
        try:
            return self._nodegroups.get_or(
                key, lambda: self.service.describe_nodegroup(tags.eks_cluster, tags.eks_nodegroup)
            )
        except CloudProviderError as exc:
            # The ASG's own tags still describe the nodes; EKS labels are a refinement.
            log.warning("aws_eks_nodegroup_unavailable", node_group=record.name, error=str(exc))
            return None

"""The AWS edge: every boto3 call the provider makes, returning plain data.

Nothing above this module sees boto3 replies; it receives the dataclasses below. Every
failure becomes a `CloudProviderError` naming the call and the object it was about.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.api import CloudProviderError

from clusterscaler_aws.cloud_config import CloudConfig

if TYPE_CHECKING:
    import boto3

log = structlog.get_logger()

# DescribeAutoScalingGroups accepts at most 100 names and 100 records per page.
MAX_NAMES_PER_DESCRIBE = 100
MAX_RECORDS = 100
# The newest activities are enough to tell whether the last launch attempts failed.
ACTIVITIES_TO_READ = 20


@dataclass(frozen=True, slots=True)
class LaunchTemplateRef:
    id: str = ""
    name: str = ""
    version: str = "$Default"

    def describe(self) -> str:
        return f"{self.name or self.id}@{self.version}"


@dataclass(frozen=True, slots=True)
class InstanceRequirements:
    """Attribute-based instance type selection: the minimums are what a new node gets at least."""

    vcpu_min: int
    memory_mib_min: int
    nvidia_gpu_min: int = 0


@dataclass(frozen=True, slots=True)
class LaunchTemplateData:
    """The parts of a launch template version that decide the instance shape."""

    instance_type: str = ""
    requirements: InstanceRequirements | None = None


def requirements_from_api(raw: Mapping[str, Any] | None) -> InstanceRequirements | None:
    if not raw:
        return None
    gpu = 0
    manufacturers = [str(m).lower() for m in raw.get("AcceleratorManufacturers") or []]
    types = [str(t).lower() for t in raw.get("AcceleratorTypes") or []]
    if "nvidia" in manufacturers and "gpu" in types:
        gpu = int((raw.get("AcceleratorCount") or {}).get("Min", 0))
    return InstanceRequirements(
        vcpu_min=int((raw.get("VCpuCount") or {}).get("Min", 0)),
        memory_mib_min=int((raw.get("MemoryMiB") or {}).get("Min", 0)),
        nvidia_gpu_min=gpu,
    )


@dataclass(frozen=True, slots=True)
class AsgInstance:
    instance_id: str
    zone: str
    lifecycle_state: str
    health_status: str = ""
    instance_type: str = ""

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.instance_id}"


@dataclass(frozen=True, slots=True)
class AsgDescription:
    """What DescribeAutoScalingGroups says about one ASG."""

    name: str
    min_size: int
    max_size: int
    desired_capacity: int
    zones: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    launch_configuration: str = ""
    launch_template: LaunchTemplateRef | None = None
    mixed_launch_template: LaunchTemplateRef | None = None
    mixed_instance_types: tuple[str, ...] = ()
    mixed_requirements: InstanceRequirements | None = None
    instances: tuple[AsgInstance, ...] = ()
    # "Delete in progress" while the ASG is being deleted.
    status: str = ""


@dataclass(frozen=True, slots=True)
class ScalingActivity:
    start_time: datetime
    status_code: str
    status_message: str = ""
    description: str = ""


@dataclass(frozen=True, slots=True)
class ManagedNodegroup:
    """The parts of EKS DescribeNodegroup that shape nodes."""

    cluster: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str, str], ...] = ()  # key, value, effect as EKS spells it
    tags: Mapping[str, str] = field(default_factory=dict)
    capacity_type: str = ""


def _launch_template(raw: Mapping[str, Any] | None) -> LaunchTemplateRef | None:
    if not raw:
        return None
    return LaunchTemplateRef(
        id=str(raw.get("LaunchTemplateId", "")),
        name=str(raw.get("LaunchTemplateName", "")),
        version=str(raw.get("Version") or "$Default"),
    )


def asg_from_api(raw: Mapping[str, Any]) -> AsgDescription:
    """One `AutoScalingGroups` entry of a DescribeAutoScalingGroups reply."""
    mixed = raw.get("MixedInstancesPolicy") or {}
    mixed_lt = mixed.get("LaunchTemplate") or {}
    overrides = tuple(
        str(o["InstanceType"]) for o in mixed_lt.get("Overrides", []) if o.get("InstanceType")
    )
    requirements = next(
        (
            requirements_from_api(o["InstanceRequirements"])
            for o in mixed_lt.get("Overrides", [])
            if o.get("InstanceRequirements")
        ),
        None,
    )
    return AsgDescription(
        name=str(raw["AutoScalingGroupName"]),
        min_size=int(raw.get("MinSize", 0)),
        max_size=int(raw.get("MaxSize", 0)),
        desired_capacity=int(raw.get("DesiredCapacity", 0)),
        zones=tuple(str(z) for z in raw.get("AvailabilityZones", [])),
        tags={str(t["Key"]): str(t.get("Value", "")) for t in raw.get("Tags", [])},
        launch_configuration=str(raw.get("LaunchConfigurationName") or ""),
        launch_template=_launch_template(raw.get("LaunchTemplate")),
        mixed_launch_template=_launch_template(mixed_lt.get("LaunchTemplateSpecification")),
        mixed_instance_types=overrides,
        mixed_requirements=requirements,
        instances=tuple(
            AsgInstance(
                instance_id=str(i["InstanceId"]),
                zone=str(i.get("AvailabilityZone", "")),
                lifecycle_state=str(i.get("LifecycleState", "")),
                health_status=str(i.get("HealthStatus", "")),
                instance_type=str(i.get("InstanceType", "")),
            )
            for i in raw.get("Instances", [])
        ),
        status=str(raw.get("Status") or ""),
    )


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _aws_errors() -> tuple[type[Exception], ...]:
    """The errors of an AWS call: botocore's own (no credentials, connection) and the
    service's replies. Imported on the first failure; a client exists by then."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


class AwsService:
    """Thin wrapper over the autoscaling, ec2 and eks clients of one region."""

    def __init__(
        self,
        region: str,
        cloud_config: CloudConfig | None = None,
        session: boto3.session.Session | None = None,
        page_size: int = MAX_RECORDS,
    ) -> None:
        # boto3 takes about 0.4 s to import: only commands that build a client pay for it.
        import boto3
        import botocore.config

        config = cloud_config or CloudConfig()
        session = session or boto3.session.Session(region_name=region)
        # Adaptive retries absorb throttling (Rate exceeded) on large fleets.
        client_config = botocore.config.Config(
            retries={"mode": "adaptive", "max_attempts": 5},
            user_agent_extra="clusterscaler-aws",
        )
        self.region = region
        self.page_size = page_size
        self._clients: dict[str, Any] = {}
        for service in ("autoscaling", "ec2", "eks"):
            override = config.endpoint_for(service, region)
            kwargs: dict[str, Any] = {"region_name": region, "config": client_config}
            if override is not None:
                kwargs["endpoint_url"] = override.url
                if override.signing_region:
                    kwargs["region_name"] = override.signing_region
            self._clients[service] = session.client(service, **kwargs)

    @property
    def autoscaling(self) -> Any:
        return self._clients["autoscaling"]

    @property
    def ec2(self) -> Any:
        return self._clients["ec2"]

    @property
    def eks(self) -> Any:
        return self._clients["eks"]

    # --- Auto Scaling groups -------------------------------------------------------------

    def describe_asgs_by_names(self, names: Sequence[str]) -> list[AsgDescription]:
        """The named ASGs that exist (missing names are simply absent from the result)."""
        result: list[AsgDescription] = []
        for chunk in _chunks(sorted(set(names)), MAX_NAMES_PER_DESCRIBE):
            result.extend(
                self._describe_asgs({"AutoScalingGroupNames": list(chunk)}, f"names {list(chunk)}")
            )
        return result

    def describe_asgs_by_filters(self, filters: Sequence[Mapping[str, object]]) -> list[AsgDescription]:
        return self._describe_asgs({"Filters": [dict(f) for f in filters]}, f"filters {list(filters)}")

    def _describe_asgs(self, params: dict[str, Any], what: str) -> list[AsgDescription]:
        paginator = self.autoscaling.get_paginator("describe_auto_scaling_groups")
        result: list[AsgDescription] = []
        try:
            for page in paginator.paginate(**params, PaginationConfig={"PageSize": self.page_size}):
                for raw in page.get("AutoScalingGroups", []):
                    result.append(asg_from_api(raw))
        except _aws_errors() as exc:
            raise CloudProviderError(f"DescribeAutoScalingGroups for {what} failed: {exc}") from exc
        return result

    def set_desired_capacity(self, asg: str, capacity: int) -> None:
        try:
            self.autoscaling.set_desired_capacity(
                AutoScalingGroupName=asg, DesiredCapacity=capacity, HonorCooldown=False
            )
        except _aws_errors() as exc:
            raise CloudProviderError(
                f"ASG {asg!r}: SetDesiredCapacity to {capacity} failed: {exc}"
            ) from exc

    def terminate_instance(self, asg: str, instance_id: str) -> None:
        try:
            self.autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
            )
        except _aws_errors() as exc:
            raise CloudProviderError(
                f"ASG {asg!r}: TerminateInstanceInAutoScalingGroup of {instance_id} failed: {exc}"
            ) from exc

    def describe_scaling_activities(self, asg: str) -> list[ScalingActivity]:
        """The newest scaling activities of `asg`, newest first."""
        try:
            reply = self.autoscaling.describe_scaling_activities(
                AutoScalingGroupName=asg, MaxRecords=ACTIVITIES_TO_READ
            )
        except _aws_errors() as exc:
            raise CloudProviderError(f"ASG {asg!r}: DescribeScalingActivities failed: {exc}") from exc
        activities = [
            ScalingActivity(
                start_time=a["StartTime"],
                status_code=str(a.get("StatusCode", "")),
                status_message=str(a.get("StatusMessage", "")),
                description=str(a.get("Description", "")),
            )
            for a in reply.get("Activities", [])
            if a.get("StartTime") is not None
        ]
        activities.sort(key=lambda a: a.start_time, reverse=True)
        return activities

    # --- Instance types of launch configurations and templates ---------------------------

    def launch_configuration_instance_type(self, name: str) -> str:
        try:
            reply = self.autoscaling.describe_launch_configurations(LaunchConfigurationNames=[name])
        except _aws_errors() as exc:
            raise CloudProviderError(
                f"launch configuration {name!r}: DescribeLaunchConfigurations failed: {exc}"
            ) from exc
        configs = reply.get("LaunchConfigurations", [])
        if not configs:
            raise CloudProviderError(f"launch configuration {name!r} does not exist")
        return str(configs[0].get("InstanceType", ""))

    def launch_template_data(self, ref: LaunchTemplateRef) -> LaunchTemplateData:
        params: dict[str, Any] = {"Versions": [ref.version or "$Default"]}
        if ref.id:
            params["LaunchTemplateId"] = ref.id
        else:
            params["LaunchTemplateName"] = ref.name
        try:
            reply = self.ec2.describe_launch_template_versions(**params)
        except _aws_errors() as exc:
            raise CloudProviderError(
                f"launch template {ref.describe()}: DescribeLaunchTemplateVersions failed: {exc}"
            ) from exc
        versions = reply.get("LaunchTemplateVersions", [])
        if not versions:
            raise CloudProviderError(f"launch template {ref.describe()} has no such version")
        data = versions[0].get("LaunchTemplateData", {})
        return LaunchTemplateData(
            instance_type=str(data.get("InstanceType", "")),
            requirements=requirements_from_api(data.get("InstanceRequirements")),
        )

    def describe_instance_types(self, names: Sequence[str]) -> list[dict[str, Any]]:
        paginator = self.ec2.get_paginator("describe_instance_types")
        result: list[dict[str, Any]] = []
        for page in paginator.paginate(InstanceTypes=list(names)):
            result.extend(page.get("InstanceTypes", []))
        return result

    def instance_exists(self, instance_id: str) -> bool:
        """Whether EC2 still has `instance_id` in a state other than terminated."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            reply = self.ec2.describe_instances(InstanceIds=[instance_id])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code", "").startswith("InvalidInstanceID"):
                return False
            raise CloudProviderError(f"instance {instance_id}: DescribeInstances failed: {exc}") from exc
        except BotoCoreError as exc:
            raise CloudProviderError(f"instance {instance_id}: DescribeInstances failed: {exc}") from exc
        for reservation in reply.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("State", {}).get("Name") not in ("terminated", "shutting-down"):
                    return True
        return False

    # --- EKS managed node groups ---------------------------------------------------------

    def describe_nodegroup(self, cluster: str, nodegroup: str) -> ManagedNodegroup:
        try:
            reply = self.eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)
        except _aws_errors() as exc:
            raise CloudProviderError(
                f"EKS node group {cluster}/{nodegroup}: DescribeNodegroup failed: {exc}"
            ) from exc
        raw = reply.get("nodegroup", {})
        return ManagedNodegroup(
            cluster=cluster,
            name=nodegroup,
            labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
            taints=tuple(
                (str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
                for t in raw.get("taints") or []
            ),
            tags={str(k): str(v) for k, v in (raw.get("tags") or {}).items()},
            capacity_type=str(raw.get("capacityType") or ""),
        )

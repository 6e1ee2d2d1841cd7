"""Template nodes for scale from zero, built from a MachineSet's annotations and template.

Capacity comes first from `capacity.cluster-autoscaler.kubernetes.io/*` (upstream Cluster
API), then from OpenShift's `machine.openshift.io/{vCPU,memoryMb,GPU,maxPods}`, then from
the `status.capacity` of the infrastructure machine template: annotations win where both
exist. CPU and memory are required: without them the group cannot describe a new node and
is skipped for scale-up from zero. Labels and taints come from the machine template plus
the `.../labels` and `.../taints` annotations; well-known labels are set as kubelet would,
the operating system and architecture from the template's `status.nodeInfo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.api import (
    DRA_DRIVER_FORM,
    GPU_RESOURCE,
    MAX_SLICE_DEVICES,
    TAINT_EFFECTS,
    ConfigurationError,
    KeyValueError,
    NodeInfo,
    QuantityError,
    Resources,
    ResourceSlice,
    Taint,
    gpu_template_slices,
    is_dra_driver_name,
    parse_cpu_millis,
    parse_int_quantity,
    parse_key_values,
    template_node_info,
)

from clusterscaler_machineapi.apigroups import (
    CAPACITY_CPU,
    CAPACITY_CSI_DRIVER,
    CAPACITY_DRA_DRIVER,
    CAPACITY_EPHEMERAL_DISK,
    CAPACITY_GPU_COUNT,
    CAPACITY_GPU_TYPE,
    CAPACITY_LABELS,
    CAPACITY_MAX_PODS,
    CAPACITY_MEMORY,
    CAPACITY_TAINTS,
    DEFAULT_ARCH,
    OPENSHIFT_GPU,
    OPENSHIFT_MAX_PODS,
    OPENSHIFT_MEMORY_MB,
    OPENSHIFT_VCPU,
)
from clusterscaler_machineapi.infrastructure import InfraTemplate
from clusterscaler_machineapi.objects import ScalableResource

MIB = 1024 * 1024

LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_BETA_OS = "beta.kubernetes.io/os"
LABEL_BETA_ARCH = "beta.kubernetes.io/arch"
LABEL_BETA_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
LABEL_LEGACY_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_LEGACY_REGION = "failure-domain.beta.kubernetes.io/region"

# Where OpenShift's provider specs keep the instance type, zone and region, per cloud
# (AWS, Azure, GCP, vSphere/OpenStack flavours), first match wins.
_INSTANCE_TYPE_PATHS = (("instanceType",), ("vmSize",), ("machineType",), ("flavor",))
_ZONE_PATHS = (("placement", "availabilityZone"), ("zone",), ("availabilityZone",))
_REGION_PATHS = (("placement", "region"), ("region",), ("location",))


class CannotScaleFromZeroError(ConfigurationError):
    """The group lacks the annotations needed to describe a node it does not have yet."""

    def __init__(
        self, resource: ScalableResource, missing: list[str], template: InfraTemplate | None = None
    ) -> None:
        self.resource = resource
        self.missing = missing
        where = (
            f"nor in status.capacity of its infrastructure template {template.ref}"
            if template is not None
            else "and no infrastructure template (spec.template.spec.infrastructureRef) gives them"
        )
        super().__init__(
            f"{resource.ref} cannot scale from zero: missing capacity annotation(s) "
            f"{'; '.join(missing)}, {where} (set them on the {resource.kind}, e.g. "
            f"{CAPACITY_CPU}: \"4\" and {CAPACITY_MEMORY}: \"16G\")"
        )


@dataclass(frozen=True, slots=True)
class Capacity:
    """What the annotations say one new node of the group has."""

    resources: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # The DRA driver publishing the GPUs (then not an extended resource), and the CSI
    # drivers with their volume attach limits (0: no limit stated).
    dra_driver: str = ""
    csi_drivers: Mapping[str, int] = field(default_factory=dict)
    # How many GPUs the DRA driver publishes for a new node.
    dra_gpus: int = 0


def _annotation_error(resource: ScalableResource, key: str, expected: str, raw: str) -> ConfigurationError:
    return ConfigurationError(
        f"{resource.ref}: annotation {key}: expected {expected}, got {raw!r}"
    )


def _count(resource: ScalableResource, key: str) -> int | None:
    raw = resource.annotations.get(key)
    if raw is None:
        return None
    text = raw.strip()
    if not text.isascii() or not text.isdigit():
        raise _annotation_error(resource, key, "a non-negative integer", raw)
    return int(text)


def _quantity(resource: ScalableResource, key: str, *, cpu: bool = False) -> int | None:
    raw = resource.annotations.get(key)
    if raw is None:
        return None
    try:
        if cpu:
            return parse_cpu_millis(raw.strip(), obj=resource.ref, field=f"annotation {key}")
        return parse_int_quantity(raw.strip(), obj=resource.ref, field=f"annotation {key}")
    except QuantityError as exc:
        raise _annotation_error(resource, key, "a Kubernetes quantity such as 4, 500m or 16Gi", raw) from exc


def parse_label_list(resource: ScalableResource, key: str) -> dict[str, str]:
    """`key=value,key2=value2` from an annotation."""
    raw = resource.annotations.get(key)
    if not raw:
        return {}
    try:
        return parse_key_values(raw)
    except KeyValueError as exc:
        raise _annotation_error(resource, key, "a list of key=value separated by commas", raw) from exc


def parse_taint_list(resource: ScalableResource, key: str) -> tuple[Taint, ...]:
    """`key=value:Effect,key2:Effect` from an annotation."""
    raw = resource.annotations.get(key)
    if not raw:
        return ()
    out: list[Taint] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        head, colon, effect = item.rpartition(":")
        k, _, v = head.partition("=")
        if not colon or not k.strip() or effect.strip() not in TAINT_EFFECTS:
            raise _annotation_error(
                resource,
                key,
                "a list of key=value:Effect separated by commas, Effect one of "
                + ", ".join(TAINT_EFFECTS),
                raw,
            )
        out.append(Taint(k.strip(), v.strip(), effect.strip()))
    return tuple(out)


_TEMPLATE_QUANTITY = "a Kubernetes quantity such as 4, 500m or 16Gi"
_BUILTIN = {"cpu", "memory", "pods", "ephemeral-storage"}


def template_capacity(template: InfraTemplate | None) -> dict[str, int]:
    """`status.capacity` of the template, cpu in millicores, the rest as integers."""
    if template is None:
        return {}
    out: dict[str, int] = {}
    for name, value in template.capacity.items():
        path = f"status.capacity.{name}"
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ConfigurationError(
                f"{template.ref}: {path}: expected {_TEMPLATE_QUANTITY}, got {value!r}"
            )
        try:
            if name == "cpu":
                out[name] = parse_cpu_millis(str(value).strip(), obj=template.ref, field=path)
            else:
                out[str(name)] = parse_int_quantity(str(value).strip(), obj=template.ref, field=path)
        except QuantityError as exc:
            raise ConfigurationError(
                f"{template.ref}: {path}: expected {_TEMPLATE_QUANTITY}, got {value!r}"
            ) from exc
    return out


def parse_csi_drivers(resource: ScalableResource) -> dict[str, int]:
    """`driver=limit,...` from the csi-driver annotation (limit 0: none stated)."""
    raw = resource.annotations.get(CAPACITY_CSI_DRIVER)
    if not raw or not raw.strip():
        return {}
    out: dict[str, int] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, limit = item.partition("=")
        name, limit = name.strip(), limit.strip()
        if not eq or not name or not limit.isascii() or not limit.isdigit():
            raise _annotation_error(
                resource,
                CAPACITY_CSI_DRIVER,
                "a list of driver=volume-limit separated by commas, the limit a "
                "non-negative integer (e.g. ebs.csi.aws.com=25)",
                raw,
            )
        out[name] = int(limit)
    return out


def read_capacity(resource: ScalableResource, template: InfraTemplate | None = None) -> Capacity:
    """The capacity of a new node of `resource`: its annotations, then `template`.

    Raises `CannotScaleFromZeroError` (listing what is missing) without CPU or memory, and
    `ConfigurationError` for a malformed annotation or template field.
    """
    infra = template_capacity(template)
    cpu = _quantity(resource, CAPACITY_CPU, cpu=True)
    if cpu is None:
        vcpus = _count(resource, OPENSHIFT_VCPU)
        cpu = infra.get("cpu") if vcpus is None else vcpus * 1000
    memory = _quantity(resource, CAPACITY_MEMORY)
    if memory is None:
        mib = _count(resource, OPENSHIFT_MEMORY_MB)
        memory = infra.get("memory") if mib is None else mib * MIB
    missing = []
    if cpu is None:
        missing.append(f"{CAPACITY_CPU} (or {OPENSHIFT_VCPU})")
    if memory is None:
        missing.append(f"{CAPACITY_MEMORY} (or {OPENSHIFT_MEMORY_MB})")
    if cpu is None or memory is None:
        raise CannotScaleFromZeroError(resource, missing, template)

    pods = _count(resource, CAPACITY_MAX_PODS)
    if pods is None:
        pods = _count(resource, OPENSHIFT_MAX_PODS)
    if pods is None:
        pods = infra.get("pods") or resource.api.default_max_pods
    ephemeral = _quantity(resource, CAPACITY_EPHEMERAL_DISK)
    if ephemeral is None:
        ephemeral = infra.get("ephemeral-storage", 0)

    extended = {k: v for k, v in infra.items() if k not in _BUILTIN}
    dra_driver = (resource.annotations.get(CAPACITY_DRA_DRIVER) or "").strip()
    if CAPACITY_DRA_DRIVER in resource.annotations and not is_dra_driver_name(dra_driver):
        raise _annotation_error(
            resource, CAPACITY_DRA_DRIVER, DRA_DRIVER_FORM,
            resource.annotations.get(CAPACITY_DRA_DRIVER) or "",
        )
    gpus = _count(resource, CAPACITY_GPU_COUNT)
    if gpus is None:
        gpus = _count(resource, OPENSHIFT_GPU)
    if dra_driver and gpus and gpus > MAX_SLICE_DEVICES:
        raise _annotation_error(
            resource, CAPACITY_GPU_COUNT,
            f"at most {MAX_SLICE_DEVICES} GPUs for one DRA driver (one ResourceSlice)",
            str(gpus),
        )
    if gpus and not dra_driver:
        # With a DRA driver the GPUs are devices of that driver, not an extended resource.
        gpu_type = (resource.annotations.get(CAPACITY_GPU_TYPE) or "").strip() or GPU_RESOURCE
        extended[gpu_type] = gpus

    return Capacity(
        resources=Resources(
            cpu=cpu, memory=memory, pods=pods, ephemeral_storage=ephemeral, extended=extended
        ),
        labels=parse_label_list(resource, CAPACITY_LABELS),
        taints=parse_taint_list(resource, CAPACITY_TAINTS),
        dra_driver=dra_driver,
        csi_drivers=parse_csi_drivers(resource),
        dra_gpus=gpus or 0 if dra_driver else 0,
    )


def system_info_labels(template: InfraTemplate | None) -> dict[str, str]:
    """`kubernetes.io/os` and `/arch` from the template's `status.nodeInfo`."""
    if template is None:
        return {}
    out: dict[str, str] = {}
    for key, label in (("operatingSystem", LABEL_OS), ("architecture", LABEL_ARCH)):
        value = template.node_info.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ConfigurationError(
                f"{template.ref}: status.nodeInfo.{key}: expected a string such as "
                f"{'linux' if key == 'operatingSystem' else 'arm64'}, got {value!r}"
            )
        out[label] = value.strip()
    return out


def _lookup(spec: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> str:
    for path in paths:
        node: Any = spec
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, str) and node:
            return node
    return ""


def template_node_name(resource: ScalableResource) -> str:
    return f"template-node-for-{resource.kind.lower()}-{resource.namespace}-{resource.name}"


def well_known_labels(
    resource: ScalableResource, node_name: str, default_arch: str = DEFAULT_ARCH
) -> dict[str, str]:
    """The labels kubelet and the cloud node manager would set on a new node."""
    labels = {
        LABEL_OS: "linux",
        LABEL_BETA_OS: "linux",
        LABEL_ARCH: default_arch,
        LABEL_BETA_ARCH: default_arch,
        LABEL_HOSTNAME: node_name,
    }
    instance_type = _lookup(resource.provider_spec, _INSTANCE_TYPE_PATHS)
    if instance_type:
        labels[LABEL_INSTANCE_TYPE] = instance_type
        labels[LABEL_BETA_INSTANCE_TYPE] = instance_type
    zone = _lookup(resource.provider_spec, _ZONE_PATHS) or resource.failure_domain
    if zone:
        labels[LABEL_ZONE] = zone
        labels[LABEL_LEGACY_ZONE] = zone
    region = _lookup(resource.provider_spec, _REGION_PATHS)
    if region:
        labels[LABEL_REGION] = region
        labels[LABEL_LEGACY_REGION] = region
    return labels


def _merge_taints(*groups: tuple[Taint, ...]) -> tuple[Taint, ...]:
    # A later taint with the same key and effect replaces an earlier one, as on a Node.
    merged: dict[tuple[str, str], Taint] = {}
    for group in groups:
        for taint in group:
            merged[(taint.key, taint.effect)] = taint
    return tuple(merged.values())


def build_template_node_info(
    resource: ScalableResource,
    template: InfraTemplate | None = None,
    *,
    source: ScalableResource | None = None,
    default_arch: str = DEFAULT_ARCH,
) -> NodeInfo:
    """A node as a new machine of `resource` would register, without pods.

    `source` is the object whose machine template new machines are made from (for a
    MachineDeployment its current MachineSet), `resource` by default; the capacity
    annotations are read from `resource`.
    """
    source = source or resource
    capacity = read_capacity(resource, template)
    name = template_node_name(resource)
    labels = well_known_labels(source, name, default_arch)
    labels.update(system_info_labels(template))
    labels.update(source.template_labels)
    labels.update(capacity.labels)
    # Keep the beta labels in step when the template or annotations override os/arch.
    labels[LABEL_BETA_OS] = labels[LABEL_OS]
    labels[LABEL_BETA_ARCH] = labels[LABEL_ARCH]
    return template_node_info(
        name,
        labels,
        _merge_taints(source.template_taints, capacity.taints),
        capacity.resources,
        resource_slices=dra_gpu_slices(name, capacity),
        # As upstream's CSINode for the template: every driver named is installed, a limit
        # of 0 states none.
        csi_volume_limits={
            driver: limit or None for driver, limit in capacity.csi_drivers.items()
        },
    )


def dra_gpu_slices(node_name: str, capacity: Capacity) -> tuple[ResourceSlice, ...]:
    """The ResourceSlice a new node's DRA driver publishes, as upstream's Cluster API
    provider predicts it from the `dra-driver` and `gpu-count` annotations
    (`gpu_template_slices`); none without a driver or GPUs."""
    if not capacity.dra_driver:
        return ()
    return gpu_template_slices(node_name, capacity.dra_driver, capacity.dra_gpus)

"""The `externalgrpc` cloud provider: every call is an RPC to the provider service.

What is cached, as upstream's client caches it:

- `node_groups()` and `node_group_for_node()` answers until the next `refresh()` (the start
  of the next loop); a node is known by its name and provider ID, and a node the service
  says is in no node group is asked about again;
- a node group's template (`NodeGroupTemplateNodeInfo`) for the life of the node group
  object, that is until the next `refresh()`;
- the GPU label and the available GPU types for the life of the provider.

DRA devices of a template (scale from zero): `nodeBytes` holds a Node and nothing else, so
a service declares its template's GPUs as DRA devices with the annotations upstream's
Cluster API provider reads on a MachineSet, set on the template Node:
`capacity.cluster-autoscaler.kubernetes.io/dra-driver` (the driver) and
`capacity.cluster-autoscaler.kubernetes.io/gpu-count` (how many GPUs it publishes): the
template then has one ResourceSlice of that driver (`gpu_template_slices`).

Errors, as upstream maps them: a call that ends with status `UNIMPLEMENTED` is
`NotImplementedByService` (upstream's `cloudprovider.ErrNotImplemented`): for
`NodeGroupGetOptions` it means "use the flags", for `NodeGroupTemplateNodeInfo` "no scale
from zero", for pricing "no price". Any other failure (an error status, no answer within
`grpc_timeout`, a reply that does not decode: `INTERNAL`) is a `ServiceError` naming the node group,
the call and the status. Where upstream returns an empty answer instead of an error
(`NodeGroups`, `GPULabel`, `GetAvailableGPUTypes`), so does this provider, after logging.

Where upstream trusts the service and we do not: a node group with no id, a negative size
or a max below its min, and a second node group of the same id, are left out with a
problem (status ConfigMap, `explain`); the other groups are served. `increase_size` and
`delete_nodes` refuse to cross the group's max and min before asking the service.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import grpc
import structlog
from clusterscaler.api import (
    DRA_DRIVER_FORM,
    CloudProviderError,
    Instance,
    InstanceErrorClass,
    InstanceErrorInfo,
    InstanceState,
    ModelError,
    Node,
    NodeGroupOptions,
    NodeInfo,
    Pod,
    ProviderDefaults,
    ProviderProblem,
    ResourceSlice,
    checked_delete,
    checked_increase,
    gpu_template_slices,
    is_dra_driver_name,
    kube_proto,
    parse_node,
)

from clusterscaler_externalgrpc import PROVIDER_NAME, protocol
from clusterscaler_externalgrpc.config import ExternalGrpcConfig

__all__ = [
    "ExternalGrpcCloudProvider",
    "ExternalGrpcNodeGroup",
    "ExternalGrpcPricing",
    "NotImplementedByService",
    "ServiceClient",
    "ServiceError",
    "open_channel",
    "provider_for",
]

log = structlog.get_logger()

# Upstream's cloudprovider.InstanceErrorClass: OutOfResourcesErrorClass = 1,
# OtherErrorClass = 99.
_OUT_OF_RESOURCES_CLASS = 1
_STATES = {
    protocol.STATE_RUNNING: InstanceState.RUNNING,
    protocol.STATE_CREATING: InstanceState.CREATING,
    protocol.STATE_DELETING: InstanceState.DELETING,
}


class ServiceError(CloudProviderError):
    """A call to the provider service failed; `code` is the gRPC status name
    (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, ...), or "" for a reply that does not decode."""

    def __init__(self, message: str, method: str, code: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.code = code


class NotImplementedByService(ServiceError):
    """The service answered `UNIMPLEMENTED`: upstream's `cloudprovider.ErrNotImplemented`,
    for the calls the protocol marks optional."""


class ServiceClient:
    """Calls of the service with the cloud-config's deadline, their failures as
    `ServiceError`s."""

    def __init__(self, stub: protocol.CloudProviderStub, address: str, timeout: timedelta) -> None:
        self.stub = stub
        self.address = address
        self.timeout = timeout

    def call(self, method: str, request: Any, subject: str) -> Any:
        """Send `request` to `method`; `subject` (a node group, a node) names what the call
        is about in errors and logs."""
        log.debug("externalgrpc_call", method=method, subject=subject)
        try:
            return self.stub.call(method, request, self.timeout.total_seconds())
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
            name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
            where = f"externalgrpc provider: {subject}: {method} on {self.address}"
            if code is grpc.StatusCode.UNIMPLEMENTED:
                raise NotImplementedByService(
                    f"{where}: not implemented by the service", method, name
                ) from None
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ServiceError(
                    f"{where}: no answer within grpc_timeout "
                    f"({self.timeout.total_seconds():g}s)",
                    method,
                    name,
                ) from None
            raise ServiceError(f"{where}: {name}: {details}", method, name) from None
        except ValueError as exc:
            # grpc refuses calls on a closed channel (after `cleanup`).
            raise ServiceError(
                f"externalgrpc provider: {subject}: {method} on {self.address}: {exc}", method
            ) from None


def grpc_node(node: Node) -> Any:
    """The `ExternalGrpcNode` of `node`: its provider ID, name, labels and annotations."""
    return protocol.message(
        "ExternalGrpcNode",
        providerID=node.provider_id,
        name=node.name,
        labels=dict(node.labels),
        annotations=dict(node.annotations),
    )


def _check_group(pb: Any) -> str:
    """What is wrong with a `NodeGroup` message, or ""."""
    if not pb.id:
        return "id: expected a non-empty node group id"
    if pb.minSize < 0:
        return f"minSize: expected 0 or more, got {pb.minSize}"
    if pb.maxSize < pb.minSize:
        return f"maxSize: expected at least minSize ({pb.minSize}), got {pb.maxSize}"
    return ""


class ExternalGrpcNodeGroup:
    """A node group of the service. `min_size`, `max_size` and the debug text are those of
    the `NodeGroups` (or `NodeGroupForNode`) answer that created it."""

    def __init__(self, client: ServiceClient, id: str, min_size: int, max_size: int, debug: str) -> None:
        self._client = client
        self._id = id
        self._min = min_size
        self._max = max_size
        self._debug = debug
        self._lock = threading.Lock()
        # The template, or the error it failed with, from the first call (as upstream).
        self._template: NodeInfo | CloudProviderError | None = None

    @property
    def id(self) -> str:
        return self._id

    @property
    def min_size(self) -> int:
        return self._min

    @property
    def max_size(self) -> int:
        return self._max

    def _call(self, method: str, request: Any) -> Any:
        return self._client.call(method, request, f"node group {self._id}")

    def target_size(self) -> int:
        response = self._call("NodeGroupTargetSize", protocol.message("NodeGroupTargetSizeRequest", id=self._id))
        if response.targetSize < 0:
            raise ServiceError(
                f"externalgrpc provider: node group {self._id}: NodeGroupTargetSize: "
                f"targetSize: expected 0 or more, got {response.targetSize}",
                "NodeGroupTargetSize",
            )
        return int(response.targetSize)

    def increase_size(self, delta: int) -> None:
        checked_increase(self._id, self.target_size(), delta, self._max)
        self._call(
            "NodeGroupIncreaseSize",
            protocol.message("NodeGroupIncreaseSizeRequest", id=self._id, delta=delta),
        )

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        if not nodes:
            return
        checked_delete(f"externalgrpc provider: node group {self._id}", self.target_size(), len(nodes), self._min)
        request = protocol.message("NodeGroupDeleteNodesRequest", id=self._id)
        request.nodes.extend(grpc_node(n) for n in nodes)
        self._call("NodeGroupDeleteNodes", request)

    def decrease_target_size(self, delta: int) -> None:
        if delta >= 0:
            raise CloudProviderError(
                f"externalgrpc provider: node group {self._id}: decrease_target_size: "
                f"expected a negative delta, got {delta}"
            )
        self._call(
            "NodeGroupDecreaseTargetSize",
            protocol.message("NodeGroupDecreaseTargetSizeRequest", id=self._id, delta=delta),
        )

    def nodes(self) -> Sequence[Instance]:
        response = self._call("NodeGroupNodes", protocol.message("NodeGroupNodesRequest", id=self._id))
        out: list[Instance] = []
        for i, pb in enumerate(response.instances):
            if not pb.id:
                log.warning(
                    "externalgrpc_instance_invalid",
                    node_group=self._id,
                    field=f"instances[{i}].id",
                    expected="the instance's provider ID",
                )
                continue
            out.append(self._instance(pb))
        return out

    @staticmethod
    def _instance(pb: Any) -> Instance:
        status = pb.status
        state = _STATES.get(status.instanceState)
        if state is None:
            # Unspecified (or a value this protocol does not know): no status, as upstream.
            return Instance(pb.id)
        error = None
        info = status.errorInfo
        if info.errorCode:
            error = InstanceErrorInfo(
                error_class=InstanceErrorClass.OUT_OF_RESOURCES
                if info.instanceErrorClass == _OUT_OF_RESOURCES_CLASS
                else InstanceErrorClass.OTHER,
                error_code=info.errorCode,
                error_message=info.errorMessage,
            )
        return Instance(pb.id, state, error)

    def template_node_info(self) -> NodeInfo:
        with self._lock:
            if self._template is None:
                try:
                    self._template = self._fetch_template()
                except NotImplementedByService as exc:
                    # An answer, kept; any other failed call is asked again.
                    self._template = exc
            if isinstance(self._template, CloudProviderError):
                raise self._template
            return self._template

    def _fetch_template(self) -> NodeInfo | CloudProviderError:
        response = self._call(
            "NodeGroupTemplateNodeInfo",
            protocol.message("NodeGroupTemplateNodeInfoRequest", id=self._id),
        )
        return decode_template(self._id, response.nodeBytes)

    def exist(self) -> bool:
        return True

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        request = protocol.message("NodeGroupAutoscalingOptionsRequest", id=self._id)
        _write_options(request.defaults, defaults)
        try:
            response = self._call("NodeGroupGetOptions", request)
        except NotImplementedByService:
            return None
        if not response.HasField("nodeGroupAutoscalingOptions"):
            return None
        return _read_options(response.nodeGroupAutoscalingOptions, self._id)

    def debug(self) -> str:
        return self._debug or f"{self._id} (min {self._min}, max {self._max})"


def decode_template(group: str, node_bytes: bytes) -> NodeInfo | CloudProviderError:
    """The template node of `group` from `nodeBytes` (a protobuf-encoded v1.Node), or the
    error naming the group and the field when the bytes are not one."""
    where = f"externalgrpc provider: node group {group}: NodeGroupTemplateNodeInfo"
    if not node_bytes:
        return CloudProviderError(f"{where}: the service returned no template node (nodeBytes)")
    try:
        raw = kube_proto.to_k8s(protocol.message_type("Node").FromString(node_bytes))
    except Exception as exc:  # protobuf's DecodeError, a wrong wire type, bad UTF-8
        return CloudProviderError(
            f"{where}: nodeBytes: expected a protobuf-encoded v1.Node, got {len(node_bytes)} "
            f"bytes that do not decode ({exc})"
        )
    meta = raw.setdefault("metadata", {})
    if not meta.get("name"):
        # Upstream's NodeInfo does not need a name; our model does.
        meta["name"] = f"template-node-for-{group}"
    try:
        node = parse_node(raw)
    except (ModelError, ValueError) as exc:
        return CloudProviderError(f"{where}: nodeBytes: {exc}")
    slices = template_devices(node)
    if isinstance(slices, str):
        return CloudProviderError(f"{where}: nodeBytes: template node {node.name}: {slices}")
    return NodeInfo(node, (), slices)


# The annotations of upstream's Cluster API provider, read here on the template Node.
DRA_DRIVER_ANNOTATION = "capacity.cluster-autoscaler.kubernetes.io/dra-driver"
GPU_COUNT_ANNOTATION = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"


def template_devices(node: Node) -> tuple[ResourceSlice, ...] | str:
    """The DRA devices the template node's annotations declare, or what is wrong with them
    (naming the annotation and the expected form)."""
    driver = node.annotations.get(DRA_DRIVER_ANNOTATION)
    if driver is None:
        return ()
    if not is_dra_driver_name(driver.strip()):
        return f"annotation {DRA_DRIVER_ANNOTATION}={driver!r}: expected {DRA_DRIVER_FORM}"
    count = node.annotations.get(GPU_COUNT_ANNOTATION)
    if count is None or not count.strip().isascii() or not count.strip().isdigit():
        return (
            f"annotation {GPU_COUNT_ANNOTATION}={count!r}: expected the number of GPUs the "
            f"driver {driver.strip()} publishes for a new node, a non-negative integer"
        )
    try:
        return gpu_template_slices(node.name, driver.strip(), int(count))
    except ValueError as exc:
        return f"annotation {GPU_COUNT_ANNOTATION}={count!r}: {exc}"


def _write_options(pb: Any, options: NodeGroupOptions) -> None:
    pb.scaleDownUtilizationThreshold = options.scale_down_utilization_threshold or 0.0
    pb.scaleDownGpuUtilizationThreshold = options.scale_down_gpu_utilization_threshold or 0.0
    pb.zeroOrMaxNodeScaling = bool(options.zero_or_max_node_scaling)
    pb.ignoreDaemonSetsUtilization = bool(options.ignore_daemonsets_utilization)
    for field, value in (
        (pb.scaleDownUnneededDuration, options.scale_down_unneeded_time),
        (pb.scaleDownUnreadyDuration, options.scale_down_unready_time),
        (pb.MaxNodeProvisionDuration, options.max_node_provision_time),
    ):
        _write_duration(field, value or timedelta(0))


def _write_duration(pb: Any, value: timedelta) -> None:
    total_ns = round(value.total_seconds() * 1_000_000) * 1000
    pb.seconds, pb.nanos = divmod(total_ns, 1_000_000_000)


def _read_duration(pb: Any, field: str, group: str) -> timedelta:
    seconds, nanos = pb.seconds, pb.nanos
    if seconds < 0 or nanos < 0 or nanos >= 1_000_000_000:
        raise ServiceError(
            f"externalgrpc provider: node group {group}: NodeGroupGetOptions: {field}: "
            f"expected a non-negative duration, got {seconds}s {nanos}ns",
            "NodeGroupGetOptions",
        )
    return timedelta(seconds=seconds, microseconds=nanos // 1000)


def _read_options(pb: Any, group: str) -> NodeGroupOptions:
    """The options of a reply, every field set as upstream takes them (an absent Duration
    is 0s): the service fills them from the defaults the request carries."""
    for field in ("scaleDownUtilizationThreshold", "scaleDownGpuUtilizationThreshold"):
        value = getattr(pb, field)
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise ServiceError(
                f"externalgrpc provider: node group {group}: NodeGroupGetOptions: {field}: "
                f"expected a number from 0 to 1, got {value}",
                "NodeGroupGetOptions",
            )
    return NodeGroupOptions(
        scale_down_utilization_threshold=pb.scaleDownUtilizationThreshold,
        scale_down_gpu_utilization_threshold=pb.scaleDownGpuUtilizationThreshold,
        scale_down_unneeded_time=_read_duration(pb.scaleDownUnneededDuration, "scaleDownUnneededDuration", group),
        scale_down_unready_time=_read_duration(pb.scaleDownUnreadyDuration, "scaleDownUnreadyDuration", group),
        max_node_provision_time=_read_duration(pb.MaxNodeProvisionDuration, "MaxNodeProvisionDuration", group),
        zero_or_max_node_scaling=pb.zeroOrMaxNodeScaling,
        ignore_daemonsets_utilization=pb.ignoreDaemonSetsUtilization,
    )


def _timestamp(pb: Any, moment: datetime) -> None:
    total_us = round(moment.timestamp() * 1_000_000)
    seconds, micros = divmod(total_us, 1_000_000)
    pb.seconds = seconds
    pb.nanos = micros * 1000


class ExternalGrpcPricing:
    """Prices from the service's `PricingNodePrice` and `PricingPodPrice`. A service that
    does not price answers `UNIMPLEMENTED`: each call then raises
    `NotImplementedByService`, and the `price` expander leaves the options unchanged."""

    def __init__(self, client: ServiceClient) -> None:
        self._client = client

    def node_price(self, node: Node, start: datetime, end: datetime) -> float:
        request = protocol.message("PricingNodePriceRequest", node=grpc_node(node))
        _timestamp(request.startTimestamp, start)
        _timestamp(request.endTimestamp, end)
        response = self._client.call("PricingNodePrice", request, f"node {node.name}")
        return self._price(response.price, "PricingNodePrice", f"node {node.name}")

    def pod_price(self, pod: Pod, start: datetime, end: datetime) -> float:
        encoded = kube_proto.fill(protocol.message("Pod"), pod.to_k8s())
        request = protocol.message(
            "PricingPodPriceRequest", pod_bytes=encoded.SerializeToString(deterministic=True)
        )
        _timestamp(request.startTimestamp, start)
        _timestamp(request.endTimestamp, end)
        subject = f"pod {pod.namespace}/{pod.name}"
        response = self._client.call("PricingPodPrice", request, subject)
        return self._price(response.price, "PricingPodPrice", subject)

    def _price(self, price: float, method: str, subject: str) -> float:
        if math.isnan(price) or price < 0:
            raise ServiceError(
                f"externalgrpc provider: {subject}: {method}: price: expected a number of 0 "
                f"or more, got {price}",
                method,
            )
        return float(price)


class ExternalGrpcCloudProvider(ProviderDefaults):
    """The provider: node groups and their calls go to the service through `client`. No
    resource limits of its own: the flags' limits, as upstream."""

    PROVIDER_NAME = PROVIDER_NAME

    def __init__(self, client: ServiceClient, close: Callable[[], None] | None = None) -> None:
        self.client = client
        self._close = close
        self._lock = threading.Lock()
        self._groups: list[ExternalGrpcNodeGroup] | None = None
        self._group_of_node: dict[str, ExternalGrpcNodeGroup] = {}
        self._gpu_label: str | None = None
        self._gpu_types: frozenset[str] | None = None
        self._problems: dict[str, ProviderProblem] = {}
        self._pricing = ExternalGrpcPricing(client)

    # ------------------------------------------------------------------ node groups

    def node_groups(self) -> Sequence[ExternalGrpcNodeGroup]:
        with self._lock:
            if self._groups is not None:
                return self._groups
            try:
                response = self.client.call(
                    "NodeGroups", protocol.message("NodeGroupsRequest"), "node groups"
                )
            except ServiceError as exc:
                # As upstream: no node groups this time, asked again at the next call.
                log.warning("externalgrpc_node_groups_failed", error=str(exc))
                self._problems[""] = ProviderProblem(
                    self.client.address, "NodeGroupsFailed", str(exc)
                )
                return []
            self._problems.pop("", None)
            groups: list[ExternalGrpcNodeGroup] = []
            seen: set[str] = set()
            for i, pb in enumerate(response.nodeGroups):
                wrong = _check_group(pb)
                if not wrong and pb.id in seen:
                    wrong = "id: the service returned this node group twice; the first is kept"
                if wrong:
                    self._problem(pb.id or f"nodeGroups[{i}]", f"NodeGroups: nodeGroups[{i}]: {wrong}")
                    continue
                seen.add(pb.id)
                groups.append(self._group(pb))
            self._groups = groups
            return groups

    def _group(self, pb: Any) -> ExternalGrpcNodeGroup:
        return ExternalGrpcNodeGroup(self.client, pb.id, pb.minSize, pb.maxSize, pb.debug)

    def _problem(self, group: str, message: str) -> None:
        problem = ProviderProblem(group, "InvalidNodeGroup", f"externalgrpc provider: {message}")
        if self._problems.get(group) != problem:
            log.warning("externalgrpc_node_group_invalid", node_group=group, error=problem.message)
        self._problems[group] = problem

    def node_group_for_node(self, node: Node) -> ExternalGrpcNodeGroup | None:
        key = node.name + node.provider_id  # upstream's key: the provider ID may be empty
        with self._lock:
            cached = self._group_of_node.get(key)
            if cached is not None:
                return cached
        try:
            response = self.client.call(
                "NodeGroupForNode",
                protocol.message("NodeGroupForNodeRequest", node=grpc_node(node)),
                f"node {node.name}",
            )
        except ServiceError as exc:
            # Upstream fails the caller; here the node is left alone this loop (neither
            # counted in a group nor removed), and the other nodes are served.
            log.warning("externalgrpc_node_group_for_node_failed", node=node.name, error=str(exc))
            return None
        pb = response.nodeGroup
        if not pb.id:
            return None  # not autoscaled; not cached, as upstream
        with self._lock:
            known = {g.id: g for g in self._groups or ()}
            group = known.get(pb.id)
            if group is None:
                wrong = _check_group(pb)
                if wrong:
                    self._problem(pb.id, f"NodeGroupForNode (node {node.name}): nodeGroup: {wrong}")
                    return None
                group = self._group(pb)
            self._group_of_node[key] = group
            return group

    def has_instance(self, node: Node) -> bool:
        # The protocol has no such call (upstream returns true with ErrNotImplemented): a
        # node is never taken for one without an instance.
        return True

    def problems(self) -> Sequence[ProviderProblem]:
        with self._lock:
            return [self._problems[k] for k in sorted(self._problems)]

    # ------------------------------------------------------------------ the rest

    def pricing(self) -> ExternalGrpcPricing:
        # Always a model, as upstream: a service without prices says so per call.
        return self._pricing

    def gpu_label(self) -> str:
        with self._lock:
            if self._gpu_label is not None:
                return self._gpu_label
            try:
                response = self.client.call("GPULabel", protocol.message("GPULabelRequest"), "GPU label")
            except ServiceError as exc:
                log.warning("externalgrpc_gpu_label_failed", error=str(exc))
                return ""
            self._gpu_label = str(response.label)
            return self._gpu_label

    def available_gpu_types(self) -> frozenset[str]:
        """The GPU types the service offers (upstream's `GetAvailableGPUTypes`, whose values
        are opaque), or none when the call fails."""
        with self._lock:
            if self._gpu_types is not None:
                return self._gpu_types
            try:
                response = self.client.call(
                    "GetAvailableGPUTypes",
                    protocol.message("GetAvailableGPUTypesRequest"),
                    "GPU types",
                )
            except ServiceError as exc:
                log.warning("externalgrpc_gpu_types_failed", error=str(exc))
                return frozenset()
            self._gpu_types = frozenset(response.gpuTypes)
            return self._gpu_types

    def refresh(self) -> None:
        with self._lock:
            self._groups = None
            self._group_of_node = {}
            self._problems = {k: p for k, p in self._problems.items() if k == ""}
        self.client.call("Refresh", protocol.message("RefreshRequest"), "refresh")

    def cleanup(self) -> None:
        try:
            self.client.call("Cleanup", protocol.message("CleanupRequest"), "cleanup")
        finally:
            if self._close is not None:
                self._close()


def open_channel(config: ExternalGrpcConfig) -> grpc.Channel:
    """The channel to the service: TLS with the client certificate when the cloud-config
    has `cert` (the service's certificate verified against `cacert` for the address's
    host), plaintext otherwise."""
    if config.tls is None:
        return grpc.insecure_channel(config.address)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=config.tls.cacert,
        private_key=config.tls.key,
        certificate_chain=config.tls.cert,
    )
    return grpc.secure_channel(config.address, credentials)


def provider_for(config: ExternalGrpcConfig) -> ExternalGrpcCloudProvider:
    """A provider talking to the service of `config`."""
    channel = open_channel(config)
    client = ServiceClient(protocol.CloudProviderStub(channel), config.address, config.timeout)
    return ExternalGrpcCloudProvider(client, close=channel.close)

"""A provider service of ours for the externalgrpc tests: an in-process grpcio server
implementing upstream's `CloudProvider` service over a cloud held in memory, with faults
on demand (an error status, `UNIMPLEMENTED`, a slow answer), a record of every call, and
certificates for mutual TLS made with `cryptography`.

The service decodes requests and encodes replies with the provider's message classes; the
field numbers those classes use are checked against upstream's `.proto` separately, on the
wire (test_externalgrpc_protocol.py).

It answers as upstream's example service (its `wrapper` package, run against the real
control plane in test_externalgrpc_upstream_service.py) does: a failure of the wrapped
provider is status `UNKNOWN` carrying the provider's message (`NodeGroup "x", not found`,
CA's kwok provider's words for a bad size change), `UNIMPLEMENTED` only for what the provider
does not implement; every instance with a state has an `errorInfo`, empty when there is no
error.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from clusterscaler.api import kube_proto
from clusterscaler.model import Node
from clusterscaler_externalgrpc import protocol
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# --------------------------------------------------------------------------- the cloud

# Upstream's cloudprovider.InstanceErrorClass for a lack of capacity (OutOfResourcesErrorClass).
OUT_OF_RESOURCES_CLASS = 1


@dataclass
class FakeInstance:
    id: str
    state: int = protocol.STATE_CREATING
    error_code: str = ""
    error_message: str = ""
    error_class: int = 0


@dataclass
class FakeGroup:
    id: str
    min_size: int
    max_size: int
    target: int = 0
    template: Node | None = None
    template_bytes: bytes | None = None
    instances: list[FakeInstance] = field(default_factory=list)
    created: int = 0
    debug: str = ""


@dataclass
class Fault:
    code: grpc.StatusCode
    details: str = "injected"


class FakeService:
    """The cloud and the service's behaviour. Test code changes the attributes; the
    server's threads read them under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: dict[str, FakeGroup] = {}
        self.extra_groups: list[Any] = []  # raw NodeGroup messages appended to NodeGroups
        self.faults: dict[str, Fault] = {}
        # (method, node group id) -> the fault of that method for that group only.
        self.group_faults: dict[tuple[str, str], Fault] = {}
        self.delays: dict[str, float] = {}
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, Any]] = []
        self.gpu_label = "cloud.example.com/accelerator"
        self.gpu_types = ("nvidia-a100", "nvidia-t4")
        self.node_prices: dict[str, float] = {}
        self.pod_price = 0.0
        self.options: Callable[[str, Any], Any] | None = None  # (group, defaults) -> options
        # Groups out of capacity: their new instances stay Creating with an
        # out-of-resources error, as a cloud reports a stockout.
        self.stockouts: set[str] = set()

    def add_group(self, group_id: str, min_size: int, max_size: int, template: Node | None = None,
                  target: int = 0, debug: str = "") -> FakeGroup:
        group = FakeGroup(group_id, min_size, max_size, template=template, debug=debug)
        self.groups[group_id] = group
        for _ in range(target):
            self._grow(group, protocol.STATE_RUNNING)
        return group

    def _grow(self, group: FakeGroup, state: int) -> FakeInstance:
        group.created += 1
        group.target += 1
        instance = FakeInstance(f"fake://{group.id}/{group.created}", state)
        group.instances.append(instance)
        return instance

    def count(self, method: str) -> int:
        with self.lock:
            return self.calls[method]

    def requests_of(self, method: str) -> list[Any]:
        with self.lock:
            return [r for m, r in self.requests if m == method]

    # ------------------------------------------------------------------ the RPCs

    def _group(self, group_id: str, context: grpc.ServicerContext) -> FakeGroup:
        group = self.groups.get(group_id)
        if group is None:
            # The wrapper's words, in a plain Go error: status UNKNOWN.
            context.abort(grpc.StatusCode.UNKNOWN, f'NodeGroup "{group_id}", not found')
        assert group is not None
        return group

    def _pb_group(self, group: FakeGroup) -> Any:
        return protocol.message(
            "NodeGroup", id=group.id, minSize=group.min_size, maxSize=group.max_size,
            debug=group.debug,
        )

    def NodeGroups(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = protocol.message("NodeGroupsResponse")
        response.nodeGroups.extend(self._pb_group(g) for g in self.groups.values())
        response.nodeGroups.extend(self.extra_groups)
        return response

    def NodeGroupForNode(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = protocol.message("NodeGroupForNodeResponse")
        for group in self.groups.values():
            if any(i.id == request.node.providerID for i in group.instances):
                response.nodeGroup.CopyFrom(self._pb_group(group))
                return response
        response.nodeGroup.SetInParent()  # id "" : not autoscaled
        return response

    def PricingNodePrice(self, request: Any, context: grpc.ServicerContext) -> Any:
        hours = (request.endTimestamp.seconds - request.startTimestamp.seconds) / 3600
        price = self.node_prices.get(request.node.labels.get("node.kubernetes.io/instance-type", ""), 1.0)
        return protocol.message("PricingNodePriceResponse", price=price * hours)

    def PricingPodPrice(self, request: Any, context: grpc.ServicerContext) -> Any:
        return protocol.message("PricingPodPriceResponse", price=self.pod_price)

    def GPULabel(self, request: Any, context: grpc.ServicerContext) -> Any:
        return protocol.message("GPULabelResponse", label=self.gpu_label)

    def GetAvailableGPUTypes(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = protocol.message("GetAvailableGPUTypesResponse")
        for name in self.gpu_types:
            response.gpuTypes[name].SetInParent()
        return response

    def Cleanup(self, request: Any, context: grpc.ServicerContext) -> Any:
        return protocol.message("CleanupResponse")

    def Refresh(self, request: Any, context: grpc.ServicerContext) -> Any:
        return protocol.message("RefreshResponse")

    def NodeGroupTargetSize(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        return protocol.message("NodeGroupTargetSizeResponse", targetSize=group.target)

    def NodeGroupIncreaseSize(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        if request.delta <= 0:
            context.abort(grpc.StatusCode.UNKNOWN, "size increase must be positive")
        if group.target + request.delta > group.max_size:
            context.abort(
                grpc.StatusCode.UNKNOWN,
                f"size increase too large, desired: {group.target + request.delta} "
                f"max: {group.max_size}",
            )
        for _ in range(request.delta):
            instance = self._grow(group, protocol.STATE_CREATING)
            if group.id in self.stockouts:
                instance.error_code = "STOCKOUT"
                instance.error_message = f"no capacity left for {group.id}"
                instance.error_class = OUT_OF_RESOURCES_CLASS
        return protocol.message("NodeGroupIncreaseSizeResponse")

    def NodeGroupDeleteNodes(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        ids = {n.providerID for n in request.nodes}
        unknown = ids - {i.id for i in group.instances}
        if unknown:
            context.abort(grpc.StatusCode.UNKNOWN, f"not in {group.id}: {sorted(unknown)}")
        group.instances = [i for i in group.instances if i.id not in ids]
        group.target -= len(ids)
        return protocol.message("NodeGroupDeleteNodesResponse")

    def NodeGroupDecreaseTargetSize(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        creating = [i for i in group.instances if i.state == protocol.STATE_CREATING]
        if request.delta >= 0:
            context.abort(grpc.StatusCode.UNKNOWN, "size decrease must be negative")
        if -request.delta > len(creating):
            context.abort(
                grpc.StatusCode.UNKNOWN,
                f"attempt to delete existing nodes, targetSize: {group.target} delta: "
                f"{request.delta} existingNodes: {group.target - len(creating)}",
            )
        drop = {i.id for i in creating[request.delta:]}
        group.instances = [i for i in group.instances if i.id not in drop]
        group.target += request.delta
        return protocol.message("NodeGroupDecreaseTargetSizeResponse")

    def NodeGroupNodes(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        response = protocol.message("NodeGroupNodesResponse")
        for i in group.instances:
            pb = response.instances.add(id=i.id)
            pb.status.instanceState = i.state
            pb.status.errorInfo.SetInParent()  # as the wrapper: present, empty without an error
            if i.error_code:
                pb.status.errorInfo.errorCode = i.error_code
                pb.status.errorInfo.errorMessage = i.error_message
                pb.status.errorInfo.instanceErrorClass = i.error_class
        return response

    def NodeGroupTemplateNodeInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        response = protocol.message("NodeGroupTemplateNodeInfoResponse")
        if group.template_bytes is not None:
            response.nodeBytes = group.template_bytes
        elif group.template is not None:
            response.nodeBytes = node_bytes(group.template)
        return response

    def NodeGroupGetOptions(self, request: Any, context: grpc.ServicerContext) -> Any:
        group = self._group(request.id, context)
        if self.options is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "GetOptions not implemented")
        response = protocol.message("NodeGroupAutoscalingOptionsResponse")
        assert self.options is not None
        options = self.options(group.id, request.defaults)
        if options is not None:
            response.nodeGroupAutoscalingOptions.CopyFrom(options)
        return response

    # ------------------------------------------------------------------ serving

    def _handler(self, name: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        method = getattr(self, name)

        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            with self.lock:
                self.calls[name] += 1
                self.requests.append((name, request))
                fault = self.faults.get(name) or self.group_faults.get(
                    (name, str(getattr(request, "id", "")))
                )
                delay = self.delays.get(name, 0.0)
            if delay:
                time.sleep(delay)
            if fault is not None:
                context.abort(fault.code, fault.details)
            with self.lock:
                return method(request, context)

        return handle

    def generic_handler(self) -> grpc.GenericRpcHandler:
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                self._handler(name),
                request_deserializer=protocol.message_type(request).FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            for name, (request, _) in protocol.METHODS.items()
        }
        return grpc.method_handlers_generic_handler(protocol.SERVICE, handlers)


def node_bytes(node: Node) -> bytes:
    """`node` as the service sends it: a protobuf-encoded v1.Node."""
    encoded: bytes = kube_proto.fill(protocol.message("Node"), node.to_k8s()).SerializeToString()
    return encoded


@dataclass
class Served:
    service: FakeService
    address: str
    server: grpc.Server


def serve(service: FakeService, credentials: grpc.ServerCredentials | None = None) -> Served:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((service.generic_handler(),))
    if credentials is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    return Served(service, f"127.0.0.1:{port}", server)


@dataclass
class Pki:
    """A CA, a server certificate for localhost and 127.0.0.1, and a client certificate,
    as PEM files."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.server_key.read_bytes(), self.server_cert.read_bytes())],
            root_certificates=self.ca.read_bytes(),
            require_client_auth=True,
        )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_pki(tmp: Path, prefix: str = "") -> Pki:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{prefix}test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: str, sans: list[x509.GeneralName]) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    server_cert, server_key = leaf(
        "localhost",
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_cert, client_key = leaf("cluster-autoscaler", [x509.DNSName("cluster-autoscaler")])
    pki = Pki(
        ca=tmp / f"{prefix}ca.crt",
        server_cert=tmp / f"{prefix}server.crt",
        server_key=tmp / f"{prefix}server.key",
        client_cert=tmp / f"{prefix}client.crt",
        client_key=tmp / f"{prefix}client.key",
    )
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.server_cert.write_bytes(server_cert)
    pki.server_key.write_bytes(server_key)
    pki.client_cert.write_bytes(client_cert)
    pki.client_key.write_bytes(client_key)
    return pki


def served(credentials: grpc.ServerCredentials | None = None) -> Iterator[Served]:
    """A fixture body: a fresh service, stopped after the test."""
    running = serve(FakeService(), credentials)
    try:
        yield running
    finally:
        running.server.stop(grace=None)

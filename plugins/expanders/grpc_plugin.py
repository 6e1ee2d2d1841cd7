"""`grpc`: ask an external service which options to keep, over Cluster Autoscaler's gRPC
expander protocol, so a service written for upstream works unchanged.

`--grpc-expander-url` is the gRPC target (`host:port`, or any target gRPC accepts, such as
`dns:///expander.kube-system.svc:7000`); `--grpc-expander-cert` is the PEM certificate
that verifies the service's TLS certificate. Both are required: as upstream, there is no
insecure connection. Each `BestOptions` call carries, per option, the node group id, the
node count, the debug text and the pods it would schedule, and a map from node group id to
the option's template node (see `grpc_protocol` for the wire format; the Nodes and Pods are
written both in the deprecated message fields upstream fills and in the bytes fields its
proto asks writers to fill too).

What comes back, as upstream's client does it:

- a failed call (unreachable, TLS refused, error status, no answer within 5 seconds, a
  reply that does not decode) keeps every option: the next expander of the chain, or the
  random tie-break, decides;
- a reply with no option keeps none (the scale-up is not made);
- options naming a node group that was not offered are ignored; when none is left, every
  option is kept.

The options kept are returned in the order they were offered (our `Expander` contract),
each once.

grpc and protobuf are imported when the expander is built, so that starting the CLI with
any other expander does not load them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import structlog
from clusterscaler.api import (
    MAX_CONFIG_FILE_BYTES,
    AutoscalingOptions,
    ExpanderContext,
    Option,
    YamlFileError,
    read_file_bytes,
)

__all__ = ["GRPC_MAX_RECEIVE_BYTES", "GRPC_TIMEOUT_SECONDS", "GrpcExpander", "check_options"]

log = structlog.get_logger()

# Upstream's values: the call's deadline and the largest reply accepted.
GRPC_TIMEOUT_SECONDS = 5.0
GRPC_MAX_RECEIVE_BYTES = 128 << 20

_PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"


def check_options(options: AutoscalingOptions) -> None:
    """Check `--grpc-expander-url` and `--grpc-expander-cert` for `--expander=grpc`;
    raises `ValueError` naming the flag, the value and the expected form. Reads the
    certificate file, nothing else."""
    if not options.grpc_expander_url.strip():
        raise ValueError(
            "--grpc-expander-url: expected the address of the gRPC expander service "
            "(host:port) with --expander=grpc, got an empty value"
        )
    _read_certificate(options.grpc_expander_cert)


def _read_certificate(path: str) -> bytes:
    if not path.strip():
        raise ValueError(
            "--grpc-expander-cert: expected the path of the PEM certificate verifying the gRPC "
            "expander service with --expander=grpc (insecure connections are not allowed), "
            "got an empty value"
        )
    label = "--grpc-expander-cert"
    try:
        pem = read_file_bytes(os.path.expanduser(path), label, MAX_CONFIG_FILE_BYTES)
    # A path holding a null byte names no file: `read_file_bytes` says so too.
    except YamlFileError as exc:
        raise ValueError(
            f"{label}: expected a readable PEM certificate file, got {path!r} "
            f"({str(exc).removeprefix(label + ': ')})"
        ) from None
    if _PEM_CERTIFICATE not in pem:
        raise ValueError(
            f"--grpc-expander-cert: expected a PEM certificate ({_PEM_CERTIFICATE.decode()}), "
            f"got {path!r} without one"
        )
    return pem


class GrpcExpander:
    """Filters options through an external `grpcplugin.Expander` service."""

    name = "grpc"

    requires_pricing = False

    def __init__(
        self,
        options: AutoscalingOptions | None = None,
        *,
        timeout: float = GRPC_TIMEOUT_SECONDS,
    ) -> None:
        import grpc
        from clusterscaler.plugins.expanders import grpc_protocol

        options = options or AutoscalingOptions()
        check_options(options)
        self.url = options.grpc_expander_url.strip()
        self.timeout = timeout
        self._protocol = grpc_protocol
        self._grpc_error: type[Exception] = grpc.RpcError
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_certificate(options.grpc_expander_cert)
        )
        # Connecting is lazy: a service that is down at start-up only fails the calls.
        self._channel = grpc.secure_channel(
            self.url,
            credentials,
            options=[("grpc.max_receive_message_length", GRPC_MAX_RECEIVE_BYTES)],
        )
        self._best_options = self._channel.unary_unary(
            grpc_protocol.BEST_OPTIONS_METHOD,
            request_serializer=lambda message: message.SerializeToString(deterministic=True),
            response_deserializer=grpc_protocol.BestOptionsResponse.FromString,
        )

    def close(self) -> None:
        self._channel.close()

    def request(self, options: Sequence[Option]) -> Any:
        """The `BestOptionsRequest` for `options`."""
        protocol = self._protocol
        request = protocol.BestOptionsRequest()
        encoded_pods: dict[int, bytes] = {}
        for option in options:
            message = request.options.add(
                nodeGroupId=option.node_group.id,
                nodeCount=option.node_count,
                debug=option.debug,
            )
            for pod in option.pods:
                data = encoded_pods.get(id(pod))
                if data is None:
                    data = protocol.fill(protocol.Pod(), pod.to_k8s()).SerializeToString(deterministic=True)
                    encoded_pods[id(pod)] = data
                message.pod.add().MergeFromString(data)
                message.podBytes.append(data)
            if option.template is not None:
                node = protocol.fill(protocol.Node(), option.template.node.to_k8s())
                request.nodeMap[option.node_group.id].CopyFrom(node)
                request.nodeBytesMap[option.node_group.id] = node.SerializeToString(deterministic=True)
        return request

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        if not options:
            return []
        log.debug("grpc_expander_call", url=self.url, options=len(options))
        try:
            response = self._best_options(self.request(options), timeout=self.timeout)
        except self._grpc_error as exc:
            log.warning(
                "grpc_expander_failed",
                url=self.url,
                error=_describe(exc),
                outcome="no options filtered",
            )
            return list(options)
        if not response.options:
            log.info("grpc_expander_no_option", url=self.url, outcome="no option kept")
            return []
        offered = {option.node_group.id for option in options}
        chosen: set[str] = set()
        for returned in response.options:
            if returned.nodeGroupId in offered:
                chosen.add(returned.nodeGroupId)
            else:
                log.warning(
                    "grpc_expander_unknown_node_group",
                    url=self.url,
                    node_group=returned.nodeGroupId,
                )
        if not chosen:
            log.warning(
                "grpc_expander_no_valid_option", url=self.url, outcome="no options filtered"
            )
            return list(options)
        return [option for option in options if option.node_group.id in chosen]


def _describe(exc: Exception) -> str:
    # A grpc.RpcError raised by a call is also a grpc.Call with its status and details.
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code()}: {details()}"
    return str(exc)

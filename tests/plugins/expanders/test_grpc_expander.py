"""`--expander=grpc` against a gRPC expander service of ours on 127.0.0.1, over TLS.

The service reads requests and writes replies with a wire-format codec written here from
upstream's expander.proto and Kubernetes' generated.proto field numbers, independent of
the plugin's own message definitions: what it checks is what a service built from those
files would see.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.expander import ExpanderContext, Option
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import ScaleUpStatus
from clusterscaler.loop.expanderchain import build_expander_chain
from clusterscaler.model import NodeInfo, OwnerRef, Taint, Toleration
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.plugins.expanders.grpc_plugin import GrpcExpander
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.testing.fakecloud import FakeCloud
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# --------------------------------------------------------------------------- wire codec

Fields = dict[int, list[Any]]


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def decode(data: bytes) -> Fields:
    """Field number -> values (ints for varints, bytes for length-delimited)."""
    out: Fields = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {number}")
        out.setdefault(number, []).append(value)
    return out


def string_map(entries: list[bytes]) -> dict[str, bytes]:
    """A protobuf map's entries (key = 1, value = 2)."""
    return {decode(e)[1][0].decode(): decode(e).get(2, [b""])[0] for e in entries}


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def response(*node_group_ids: str) -> bytes:
    """BestOptionsResponse{options: [Option{nodeGroupId}]}"""
    return b"".join(encode_field(1, encode_field(1, g.encode())) for g in node_group_ids)


# --------------------------------------------------------------------------- TLS and server


@dataclass
class Certificate:
    cert: Path
    key: Path


def _certificate(tmp: Path, name: str) -> Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    out = Certificate(tmp / f"{name}.crt", tmp / f"{name}.key")
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return out


@dataclass
class ExpanderService:
    """`grpcplugin.Expander/BestOptions`: records requests, answers with `reply`."""

    url: str
    cert: Path
    reply: Callable[[Fields], bytes] = lambda request: response()
    requests: list[Fields] = field(default_factory=list)
    delay: float = 0.0
    status: grpc.StatusCode | None = None

    def handle(self, request: Fields, context: grpc.ServicerContext) -> bytes:
        self.requests.append(request)
        if self.delay:
            time.sleep(self.delay)
        if self.status is not None:
            context.abort(self.status, "expander says no")
        return self.reply(request)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Certificate, Certificate]:
    tmp = tmp_path_factory.mktemp("grpc-certs")
    return _certificate(tmp, "server"), _certificate(tmp, "other")


@pytest.fixture
def service(certs: tuple[Certificate, Certificate]) -> Iterator[ExpanderService]:
    cert = certs[0]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    svc = ExpanderService(url="", cert=cert.cert)
    handler = grpc.method_handlers_generic_handler(
        "grpcplugin.Expander",
        {
            "BestOptions": grpc.unary_unary_rpc_method_handler(
                svc.handle, request_deserializer=decode, response_serializer=lambda b: b
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    credentials = grpc.ssl_server_credentials([(cert.key.read_bytes(), cert.cert.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    svc.url = f"127.0.0.1:{port}"
    yield svc
    server.stop(grace=None)


def expander_for(service: ExpanderService, **kw: Any) -> GrpcExpander:
    options = AutoscalingOptions(
        expander=["grpc"], grpc_expander_url=service.url, grpc_expander_cert=str(service.cert)
    )
    return GrpcExpander(options, **kw)


# --------------------------------------------------------------------------- options


@dataclass
class Group:
    id: str

    def exist(self) -> bool:
        return True


def option(group: str, nodes: int = 1, pods: int = 1, debug: str = "") -> Option:
    template = NodeInfo(
        make_node(
            f"{group}-template",
            "4",
            "16Gi",
            labels={"pool": group},
            taints=(Taint("dedicated", group, "NoSchedule"),),
        )
    )
    return Option(
        node_group=Group(group),
        node_count=nodes,
        pods=tuple(
            make_pod(
                f"{group}-p{i}",
                "1500m",
                "1Gi",
                namespace="web",
                labels={"app": "web"},
                tolerations=(Toleration(key="dedicated", operator="Exists"),),
                owner=OwnerRef("ReplicaSet", "web", "uid-rs", True, "apps/v1"),
            )
            for i in range(pods)
        ),
        template=template,
        debug=debug,
    )


def ids(options: list[Option]) -> list[str]:
    return [o.node_group.id for o in options]


# --------------------------------------------------------------------------- the request


def test_request_carries_each_option_its_pods_and_template(service: ExpanderService) -> None:
    service.reply = lambda request: response("b")
    options = [option("a", nodes=2, pods=2, debug="most pods"), option("b", nodes=3)]

    chosen = expander_for(service).best_options(options, ExpanderContext())

    assert ids(chosen) == ["b"]
    (request,) = service.requests
    sent = [decode(o) for o in request[1]]
    # Option: nodeGroupId = 1, nodeCount = 2, debug = 3, pod = 4, podBytes = 5.
    assert [o[1][0] for o in sent] == [b"a", b"b"]
    assert [o[2][0] for o in sent] == [2, 3]
    assert sent[0][3] == [b"most pods"]
    assert 3 not in sent[1]  # proto3: an empty string is not written
    assert len(sent[0][4]) == 2 and sent[0][5] == sent[0][4]
    pod = decode(sent[0][4][0])
    meta, spec = decode(pod[1][0]), decode(pod[2][0])
    assert meta[1] == [b"a-p0"] and meta[3] == [b"web"]  # name, namespace
    assert string_map(meta[11]) == {"app": b"web"}  # labels
    owner = decode(meta[13][0])
    assert (owner[1], owner[3], owner[6]) == ([b"ReplicaSet"], [b"web"], [1])
    container = decode(spec[2][0])
    requests = string_map(decode(container[8][0])[2])  # resources.requests
    assert {k: decode(v)[1][0] for k, v in requests.items()} == {
        "cpu": b"1500m",
        "memory": b"1Gi",
    }
    toleration = decode(spec[22][0])
    assert (toleration[1], toleration[2]) == ([b"dedicated"], [b"Exists"])

    # nodeMap = 2 (v1.Node messages) and nodeBytesMap = 3 (the same, as bytes), by group id.
    nodes = string_map(request[2])
    assert string_map(request[3]) == nodes
    assert sorted(nodes) == ["a", "b"]
    node = decode(nodes["a"])
    node_meta, node_spec, node_status = (decode(node[n][0]) for n in (1, 2, 3))
    assert node_meta[1] == [b"a-template"]
    assert string_map(node_meta[11])["pool"] == b"a"
    taint = decode(node_spec[5][0])
    assert (taint[1], taint[2], taint[3]) == ([b"dedicated"], [b"a"], [b"NoSchedule"])
    capacity = {k: decode(v)[1][0] for k, v in string_map(node_status[1]).items()}
    assert capacity["cpu"] == b"4" and capacity["memory"] == b"16Gi"
    assert {k: decode(v)[1][0] for k, v in string_map(node_status[2]).items()} == capacity


def test_kept_options_come_in_offered_order_once(service: ExpanderService) -> None:
    service.reply = lambda request: response("c", "a", "c")
    options = [option("a"), option("b"), option("c")]
    assert ids(expander_for(service).best_options(options, ExpanderContext())) == ["a", "c"]


# --------------------------------------------------------------------------- as upstream


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(response("a", "zzz"), ["a"], id="unknown-group-ignored"),
        pytest.param(response("zzz"), ["a", "b"], id="only-unknown-groups-keep-all"),
        pytest.param(response(), [], id="no-option-keeps-none"),
    ],
)
def test_replies(service: ExpanderService, reply: bytes, expected: list[str]) -> None:
    service.reply = lambda request: reply
    options = [option("a"), option("b")]
    assert ids(expander_for(service).best_options(options, ExpanderContext())) == expected


def test_error_status_keeps_every_option(service: ExpanderService) -> None:
    service.status = grpc.StatusCode.INTERNAL
    options = [option("a"), option("b")]
    assert ids(expander_for(service).best_options(options, ExpanderContext())) == ["a", "b"]
    assert len(service.requests) == 1


def test_a_reply_after_the_deadline_keeps_every_option(service: ExpanderService) -> None:
    service.reply = lambda request: response("a")
    service.delay = 1.0
    expander = expander_for(service, timeout=0.2)
    started = time.monotonic()
    assert ids(expander.best_options([option("a"), option("b")], ExpanderContext())) == [
        "a",
        "b",
    ]
    assert time.monotonic() - started < 0.9
    assert len(service.requests) == 1


def test_default_deadline_is_upstreams_five_seconds(service: ExpanderService) -> None:
    assert expander_for(service).timeout == 5.0


def test_unreachable_service_keeps_every_option(service: ExpanderService) -> None:
    closed = dataclasses.replace(service, url="127.0.0.1:1")
    options = [option("a"), option("b")]
    assert ids(expander_for(closed).best_options(options, ExpanderContext())) == ["a", "b"]


def test_a_server_the_certificate_does_not_verify_is_not_asked(
    service: ExpanderService, certs: tuple[Certificate, Certificate]
) -> None:
    service.reply = lambda request: response("a")
    other = dataclasses.replace(service, cert=certs[1].cert)
    options = [option("a"), option("b")]
    assert ids(expander_for(other).best_options(options, ExpanderContext())) == ["a", "b"]
    assert service.requests == []


# --------------------------------------------------------------------------- in the loop


def test_the_loop_scales_up_the_group_the_service_chooses(service: ExpanderService) -> None:
    registry = collect_registry(build_plugin_manager())  # the installed entry point
    clock = VirtualClock(dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    cluster = InMemoryCluster()
    cloud = FakeCloud(cluster, clock, name="fake")
    groups = {name: cloud.add_group(name, 0, 10) for name in ("small", "other", "chosen")}
    cluster.add_pod(
        make_pod(
            "p",
            "1",
            "1Gi",
            unschedulable=True,
            owner=OwnerRef("ReplicaSet", "web", "uid-rs", True, "apps/v1"),
            creation_time=clock.now() - dt.timedelta(minutes=5),
        )
    )
    service.reply = lambda request: response("chosen")
    options = AutoscalingOptions(
        expander=["grpc"], grpc_expander_url=service.url, grpc_expander_cert=str(service.cert)
    )
    autoscaler = Autoscaler.from_registry(
        registry, options=options, provider=cloud, source=cluster, actions=cluster, clock=clock
    )

    result = autoscaler.run_once(clock.now())

    assert result.scale_up.status is ScaleUpStatus.SUCCESSFUL
    assert {name: g.target for name, g in groups.items()} == {"small": 0, "other": 0, "chosen": 1}
    (request,) = service.requests
    assert sorted(decode(o)[1][0] for o in request[1]) == [b"chosen", b"other", b"small"]


def test_a_chain_after_grpc_decides_when_the_service_fails(service: ExpanderService) -> None:
    registry = collect_registry(build_plugin_manager())
    service.status = grpc.StatusCode.UNAVAILABLE
    options = AutoscalingOptions(
        expander=["grpc", "least-nodes"],
        grpc_expander_url=service.url,
        grpc_expander_cert=str(service.cert),
    )
    chain = build_expander_chain(options.expander, registry, options)
    best = chain.best_option([option("a", nodes=3), option("b", nodes=1)], ExpanderContext())
    assert best is not None and best.node_group.id == "b"


# --------------------------------------------------------------------------- flags


def parse(argv: list[str]) -> AutoscalingOptions:
    from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args

    host, registry = load_plugins(argv)
    options, _ = parse_autoscaler_args(argv, host, registry)
    return options


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--grpc-expander-cert={cert}"], "--grpc-expander-url: expected", id="no-url"),
        pytest.param(["--grpc-expander-url=127.0.0.1:7000"], "--grpc-expander-cert: expected", id="no-cert"),
        pytest.param(["--grpc-expander-url=127.0.0.1:7000", "--grpc-expander-cert={tmp}/missing.crt"], "missing.crt", id="cert-missing"),
        pytest.param(["--grpc-expander-url=127.0.0.1:7000", "--grpc-expander-cert={tmp}/not-pem.crt"], "expected a PEM certificate", id="cert-not-pem"),
        # A device read without end: refused after the bound, not read until memory runs out.
        pytest.param(["--grpc-expander-url=127.0.0.1:7000", "--grpc-expander-cert=/dev/zero"], "'/dev/zero' (expected a file of at most 16 MiB, got more)", id="cert-device"),
    ],
)  # fmt: skip
def test_bad_flags_are_errors_naming_the_flag(
    flags: list[str],
    message: str,
    tmp_path: Path,
    certs: tuple[Certificate, Certificate],
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "not-pem.crt").write_text("hello\n")
    argv = [
        "--cloud-provider=sim",
        "--expander=grpc",
        *(f.format(cert=certs[0].cert, tmp=tmp_path) for f in flags),
    ]
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_good_flags_parse(certs: tuple[Certificate, Certificate]) -> None:
    argv = [
        "--cloud-provider=sim",
        "--expander=priority,grpc",
        "--grpc-expander-url=dns:///expander.kube-system.svc:7000",
        f"--grpc-expander-cert={certs[0].cert}",
    ]
    options = parse(argv)
    assert options.expander == ["priority", "grpc"]
    assert options.grpc_expander_url == "dns:///expander.kube-system.svc:7000"


def test_grpc_flags_are_not_checked_for_other_expanders() -> None:
    assert parse(["--cloud-provider=sim", "--expander=least-waste"]).grpc_expander_url == ""


def test_other_expanders_do_not_load_grpc() -> None:
    code = (
        "import sys\n"
        "from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args\n"
        "argv = ['--cloud-provider=sim', '--expander=least-waste']\n"
        "host, registry = load_plugins(argv)\n"
        "parse_autoscaler_args(argv, host, registry)\n"
        "assert 'grpc' in registry.expanders\n"
        "loaded = sorted(m for m in sys.modules if m == 'grpc' or m.startswith('google.protobuf'))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""


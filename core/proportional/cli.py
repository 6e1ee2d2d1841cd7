"""`clusterscaler proportional`: flags, the offline calculator and the poll loop.

`main(argv)` receives the arguments after the word `proportional`. With `calc` first it
evaluates parameters offline and prints `{"replicas": R}`; otherwise it runs the controller
with the upstream cluster-proportional-autoscaler's flags. Bad flags exit with status 2 and
a message naming the flag, the value and the expected form.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

import structlog
from clusterscaler import __version__
from clusterscaler.proportional.calculator import ClusterSize, compute_replicas
from clusterscaler.proportional.clustersize import LABELS_FORM, parse_node_labels
from clusterscaler.proportional.params import (
    Params,
    ParamsError,
    configmap_data_from_document,
    parse_params_document,
)
from clusterscaler.proportional.targets import TARGET_FORM, Target, parse_targets
from clusterscaler.report.logs import configure_logging

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# What the API server's audit log shows for our requests, as for the upstream image.
USER_AGENT = "cluster-proportional-autoscaler"


class UsageError(Exception):
    """A bad command line; the message names the flag, the value and the expected form."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse


def _bool(text: str) -> bool:
    # Go's strconv.ParseBool spellings, so glog-style `--logtostderr=true` keeps working.
    lowered = text.lower()
    if lowered in ("1", "t", "true"):
        return True
    if lowered in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _params_doc(text: str) -> str:
    try:
        parse_params_document(text)
    except ParamsError as exc:
        raise argparse.ArgumentTypeError(
            f'expected JSON such as {{"linear": {{"nodesPerReplica": 4}}}}, got {text!r}: {exc}'
        ) from exc
    return text


def _node_labels(text: str) -> str:
    try:
        parse_node_labels(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _targets(text: str) -> str:
    try:
        parse_targets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def _api_url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"expected an API server URL such as https://10.0.0.1:6443, got {text!r}"
        )
    return text


def _existing_file(text: str) -> str:
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"expected a kubeconfig file, got {text!r} (not found)")
    return text


def _address(text: str) -> str:
    _, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"expected [host]:port such as :8080 or 127.0.0.1:8080, got {text!r}"
        )
    return text


# ----------------------------------------------------------------------------- calc


def build_calc_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="clusterscaler proportional calc",
        description=(
            "Compute the replica count that cluster-proportional parameters give for a "
            'cluster size, and print it as {"replicas": R}. Use it to check a ConfigMap '
            "before applying it."
        ),
    )
    parser.add_argument(
        "--params",
        required=True,
        help='the parameters, e.g. \'{"linear": {"coresPerReplica": 256, "nodesPerReplica": 16}}\'; '
        "the mode's value may also be a string of JSON, as in a ConfigMap's data",
    )
    parser.add_argument("--nodes", required=True, type=_int_at_least(0), help="all nodes")
    parser.add_argument("--cores", required=True, type=_int_at_least(0), help="all cores")
    parser.add_argument(
        "--schedulable-nodes",
        type=_int_at_least(0),
        help="schedulable (Ready, not cordoned) nodes; defaults to --nodes",
    )
    parser.add_argument(
        "--schedulable-cores",
        type=_int_at_least(0),
        help="cores of the schedulable nodes; defaults to --cores",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also print how the count was reached: the mode, the nodes and cores the "
        "parameters looked at, and the replicas each of them asks for",
    )
    return parser


def _calc_size(args: argparse.Namespace) -> ClusterSize:
    schedulable_nodes = args.nodes if args.schedulable_nodes is None else args.schedulable_nodes
    schedulable_cores = args.cores if args.schedulable_cores is None else args.schedulable_cores
    if schedulable_nodes > args.nodes:
        raise UsageError(
            f"argument --schedulable-nodes: expected at most --nodes ({args.nodes}), "
            f"got {schedulable_nodes}"
        )
    if schedulable_cores > args.cores:
        raise UsageError(
            f"argument --schedulable-cores: expected at most --cores ({args.cores}), "
            f"got {schedulable_cores}"
        )
    return ClusterSize(
        nodes=args.nodes,
        cores=args.cores,
        schedulable_nodes=schedulable_nodes,
        schedulable_cores=schedulable_cores,
    )


def calc_main(argv: Sequence[str], stdout: IO[str], stderr: IO[str]) -> int:
    parser = build_calc_parser()
    try:
        args = parser.parse_args(list(argv))
        size = _calc_size(args)
    except UsageError as exc:
        parser.print_usage(stderr)
        print(f"{parser.prog}: error: {exc}", file=stderr)
        return EXIT_USAGE
    try:
        params = parse_params_document(args.params)
    except ParamsError as exc:
        print(f"{parser.prog}: error: invalid params: {exc}", file=stderr)
        return EXIT_USAGE
    _warn_ignored(params, stderr)
    decision = compute_replicas(params, size)
    result: dict[str, Any] = {"replicas": decision.replicas}
    if args.explain:
        result.update(
            mode=decision.mode,
            nodes=decision.nodes,
            cores=decision.cores,
            includeUnschedulableNodes=decision.include_unschedulable_nodes,
            replicasFromNodes=decision.replicas_from_nodes,
            replicasFromCores=decision.replicas_from_cores,
            decidedBy=decision.decided_by,
        )
    print(json.dumps(result), file=stdout)
    return EXIT_OK


def _warn_ignored(params: Params, stderr: IO[str]) -> None:
    if params.ignored_keys:
        print(
            f"warning: {params.mode}: ignoring unknown keys {', '.join(params.ignored_keys)}",
            file=stderr,
        )


# ----------------------------------------------------------------------- controller


@dataclass(frozen=True)
class ControllerConfig:
    """The controller's flags, validated."""

    targets: tuple[Target, ...]
    namespace: str
    configmap: str
    default_params: dict[str, str] | None
    poll_period_seconds: int
    node_labels: dict[str, str]
    max_sync_failures: int
    kubeconfig: str | None
    kubernetes: str | None
    address: str
    verbosity: int
    logging_format: str = "text"


def build_controller_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="clusterscaler proportional",
        description=(
            "Scale Deployments, ReplicaSets, StatefulSets or ReplicationControllers with the "
            "number of nodes and cores of the cluster, with the flags and ConfigMap formats "
            "of the cluster-proportional-autoscaler. "
            "`clusterscaler proportional calc --help` evaluates parameters offline. "
            "glog's flags (--logtostderr, --alsologtostderr, --log-dir, --log-file, "
            "--vmodule, --log-backtrace-at, --stderrthreshold) are accepted for "
            "compatibility; logs always go to stderr."
        ),
    )
    parser.add_argument(
        "--target",
        type=_targets,
        metavar="KIND/NAME[,KIND/NAME...]",
        help=f"targets to scale: {TARGET_FORM}, comma separated (not case sensitive)",
    )
    parser.add_argument(
        "--namespace",
        default=None,
        help="namespace of the targets and the ConfigMap; defaults to $MY_POD_NAMESPACE",
    )
    parser.add_argument("--configmap", default="", help="ConfigMap holding the parameters")
    parser.add_argument(
        "--default-params",
        type=_params_doc,
        default=None,
        help="parameters (JSON) to create the ConfigMap with when it does not exist; "
        "an existing ConfigMap is never overwritten",
    )
    parser.add_argument(
        "--poll-period-seconds",
        type=_int_at_least(1),
        default=10,
        help="seconds between polls (default 10)",
    )
    parser.add_argument(
        "--nodelabels",
        type=_node_labels,
        default="",
        help=f"count only nodes carrying these labels: {LABELS_FORM}",
    )
    parser.add_argument(
        "--max-sync-failures",
        type=_int_at_least(0),
        default=0,
        help="consecutive failed polls before exiting; 0 retries forever (default 0)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=_existing_file,
        default=None,
        help="kubeconfig file (default: in-cluster)",
    )
    parser.add_argument(
        "--kubernetes",
        "--master",
        dest="kubernetes",
        type=_api_url,
        default=None,
        help="API server URL",
    )
    parser.add_argument(
        "--address",
        type=_address,
        default=":8080",
        metavar="[HOST]:PORT",
        help="[host]:port serving /healthz and /last-poll (default :8080)",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--v", type=_int_at_least(0), default=0, help="log verbosity")
    parser.add_argument(
        "--logging-format", choices=("text", "json"), default="text", help="log format"
    )
    # glog flags the upstream image accepts; kept so existing manifests run unchanged.
    # Logs always go to stderr, so these only need to parse.
    for flag in ("--logtostderr", "--alsologtostderr"):
        parser.add_argument(
            flag, type=_bool, nargs="?", const=True, default=True, help=argparse.SUPPRESS
        )
    for flag in ("--log-dir", "--vmodule", "--log-backtrace-at", "--log-file", "--stderrthreshold"):
        parser.add_argument(flag, default="", help=argparse.SUPPRESS)
    return parser


def parse_controller_args(argv: Sequence[str], environ: dict[str, str]) -> ControllerConfig:
    """Validate the controller's flags; raises `UsageError` naming the flag."""
    args = build_controller_parser().parse_args(list(argv))
    if not args.target:
        raise UsageError(f"argument --target: expected {TARGET_FORM}, got ''")
    if not args.configmap:
        raise UsageError("argument --configmap: expected the name of a ConfigMap, got ''")
    namespace = args.namespace or environ.get("MY_POD_NAMESPACE", "")
    if not namespace:
        raise UsageError(
            "argument --namespace: expected a namespace (or $MY_POD_NAMESPACE), got ''"
        )
    return ControllerConfig(
        targets=parse_targets(args.target),
        namespace=namespace,
        configmap=args.configmap,
        default_params=(
            configmap_data_from_document(args.default_params) if args.default_params else None
        ),
        poll_period_seconds=args.poll_period_seconds,
        node_labels=parse_node_labels(args.nodelabels),
        max_sync_failures=args.max_sync_failures,
        kubeconfig=args.kubeconfig,
        kubernetes=args.kubernetes,
        address=args.address,
        verbosity=args.v,
        logging_format=args.logging_format,
    )


def run_controller(
    config: ControllerConfig,
    api_client: Any = None,
    stop: threading.Event | None = None,
) -> int:
    """Poll until `stop` is set or `--max-sync-failures` consecutive polls fail."""
    from clusterscaler.kube.client import ClientSettings, build_api_client
    from clusterscaler.proportional.controller import Controller
    from clusterscaler.proportional.server import HealthServer, PollHealth

    log = structlog.get_logger()
    stop = stop or threading.Event()
    client = (
        api_client
        if api_client is not None
        else build_api_client(
            ClientSettings(
                kubeconfig=config.kubeconfig or "",
                kubernetes=config.kubernetes or "",
                user_agent=USER_AGENT,
            )
        )
    )
    controller = Controller(
        client,
        namespace=config.namespace,
        configmap=config.configmap,
        targets=config.targets,
        default_params=config.default_params,
        node_labels=config.node_labels,
        watch_nodes=True,
    )
    health = PollHealth()
    server = HealthServer(config.address, health)
    server.start()
    log.info(
        "proportional_started",
        targets=",".join(str(t) for t in config.targets),
        namespace=config.namespace,
        configmap=config.configmap,
        poll_period_seconds=config.poll_period_seconds,
        address=server.address,
    )
    try:
        while True:
            error = controller.poll_safely()
            failures = health.record(error)
            if (
                error is not None
                and config.max_sync_failures
                and (failures >= config.max_sync_failures)
            ):
                log.error(
                    "proportional_giving_up",
                    consecutive_failures=failures,
                    max_sync_failures=config.max_sync_failures,
                    error=str(error),
                )
                return EXIT_FAILED
            if stop.wait(config.poll_period_seconds):
                return EXIT_OK
    finally:
        server.stop()
        controller.close()


def _startup_errors() -> tuple[type[Exception], ...]:
    """What makes the controller fail to start: a missing or bad kubeconfig, a port taken.

    The kubernetes package is imported only when one reaches `main`; `calc` never needs it.
    """
    from kubernetes.config.config_exception import ConfigException

    return (OSError, ValueError, ConfigException)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `clusterscaler proportional ARGS...` (argv without `proportional`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "calc":
        try:
            return calc_main(args[1:], sys.stdout, sys.stderr)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
    try:
        if "--version" in args:
            print(f"clusterscaler proportional {__version__}")
            return EXIT_OK
        config = parse_controller_args(args, dict(os.environ))
    except UsageError as exc:
        parser = build_controller_parser()
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    configure_logging(config.verbosity, config.logging_format, sys.stderr)
    stop = threading.Event()
    # Kubernetes stops pods with SIGTERM: finish the current poll and exit cleanly.
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if in_main_thread else None
    try:
        return run_controller(config, stop=stop)
    except KeyboardInterrupt:
        return EXIT_OK
    except _startup_errors() as exc:
        # Startup failures only (no kubeconfig, port taken): polls catch their own errors.
        structlog.get_logger().error(
            "proportional_start_failed", error=str(exc), error_type=type(exc).__name__
        )
        return EXIT_FAILED
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)

"""`python -m bench peer`: upstream Cluster Autoscaler and clusterscaler, side by side.

    python -m bench peer --build [--ca-source PATH]     build upstream CA and its example
                                                        external gRPC provider service (cached)
    python -m bench peer [--only NAME] [--repeat N] [--json]

Each scenario of `bench.peer.scenarios` runs `--repeat` times for each autoscaler, each run
on a fresh control plane (`clusterscaler.testing.controlplane`): the kwok provider's
ConfigMaps are applied, the autoscaler is started (`--cloud-provider=kwok`, the same flags
for both: CA's defaults plus the scenario's) and waited for until its first loop has run
(`function_duration_seconds{function="main"}` counts one), then the scenario's workload is
applied with one `kubectl apply`. From that moment the harness watches Nodes and Pods:

- `decision_latency_s`: until the first Node appears (the first node-group increase);
- `end_to_end_s`: until every pod of the workload is bound (`spec.nodeName` set);
- `nodes_added` (and `nodes_per_group`), `pods_pending`: after the last pod was bound
  and `settle_s` more seconds, or at the scenario's timeout;
- `cpu_s`: the autoscaler process's CPU seconds (user + system, children included) from the
  workload's creation to that end (a steady scenario: over its `observe_s` window);
  `startup_cpu_s` before it, up to its first loop;
- `peak_rss_mib`: the process's peak resident set (`VmHWM`) over its whole life;
- `loop_s`: its mean main-loop duration while the workload was handled, from /metrics;
- on scale-down, `nodes_removed`, and `first_removal_s` and `last_removal_s`: from the
  Deployments' scale-down to the first and the last Node deleted;
- `api_requests`: the requests it made in the measured span, by HTTP method, from its
  /metrics; `events`: the event writes it made from its start to the end, by the involved
  object's kind and the reason, from the Events' counts (`observe.events_written`).

The two autoscalers alternate (CA first) so that a drift of the shared machine does not
favour one. Text output prints both side by side with MET / NOT MET per target; `--json`
prints `{"rows": [...], "targets": {...}, ...}`, one row per scenario, autoscaler and run.

Exit status: 0 when every run completed, 1 when a run failed (the autoscaler exited, the
control plane did not start, the workload was not applied), 2 on bad arguments or when
upstream CA is not built.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clusterscaler.testing import controlplane, upstreamca
from clusterscaler.testing.cliprocess import clusterscaler_command
from clusterscaler.testing.controlplane import ControlPlaneError
from clusterscaler.testing.kwokenv import GROUP_LABEL, NAMESPACE

from bench.peer.observe import (
    ClusterWatch,
    LoopMetric,
    api_requests,
    cluster_watch,
    cpu_seconds,
    event_counts,
    events_written,
    final_state,
    main_loop,
    peak_rss_bytes,
)
from bench.peer.scenarios import SCALE_DOWN, SCALE_UP, SCENARIOS, STEADY, PeerScenario
from bench.peer.workload import (
    as_list,
    bound_pods,
    existing_nodes,
    prebound_replica_sets,
    provider_objects,
    scaled_down,
    workload_objects,
)

CA = "cluster-autoscaler"
CLUSTERSCALER = "clusterscaler"
AUTOSCALERS = (CA, CLUSTERSCALER)
MIB = 1024 * 1024
READY_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
PROGRESS_EVERY = 10.0  # seconds between two progress lines on standard error
# The CPU target: clusterscaler's CPU seconds per scale-up within this factor of CA's.
CPU_FACTOR = 1.5


# --------------------------------------------------------------------------- rows


@dataclass
class Row:
    """One run of one scenario by one autoscaler (seconds, MiB)."""

    scenario: str
    autoscaler: str
    run: int
    decision_latency_s: float | None = None
    end_to_end_s: float | None = None
    nodes_added: int = 0
    nodes_per_group: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    pods_pending: int = 0
    cpu_s: float | None = None
    startup_cpu_s: float | None = None
    peak_rss_mib: float | None = None
    loop_s: float | None = None
    loops: int = 0
    nodes_removed: int = 0
    first_removal_s: float | None = None
    last_removal_s: float | None = None
    # Requests to the API server in the measured span, by HTTP method (/metrics'
    # rest_client_requests_total; empty when the process does not expose it).
    api_requests: dict[str, int] = field(default_factory=dict)
    # The events the autoscaler wrote from its start to the end of the run, by the
    # involved object's kind and the reason (`events_written`).
    events: dict[str, int] = field(default_factory=dict)
    version: str = ""
    error: str = ""
    note: str = ""  # what the harness noticed without failing the run

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def api_requests_total(self) -> int | None:
        return sum(self.api_requests.values()) if self.api_requests else None

    @property
    def events_total(self) -> int | None:
        return sum(self.events.values()) if self.events else None

    def decision(self) -> tuple[tuple[tuple[str, int], ...], int]:
        """What both autoscalers must agree on: nodes per group and pods left pending."""
        return tuple(sorted(self.nodes_per_group.items())), self.pods_pending

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Verdict:
    target: str
    met: bool
    detail: str


def _median(rows: Sequence[Row], attr: str) -> float | None:
    values = [getattr(r, attr) for r in rows if getattr(r, attr) is not None]
    return statistics.median(values) if values else None


def _fmt(value: float | None, unit: str = "s") -> str:
    if value is None:
        return "-"
    if not unit:
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{value:.2f} {unit}"


def evaluate(scenario: str, rows: Sequence[Row]) -> list[Verdict]:
    """Issue 32's targets for one scenario from its rows (medians over the runs; decisions
    run by run). A target whose figures are missing (a failed run) is NOT MET."""
    ca = [r for r in rows if r.scenario == scenario and r.autoscaler == CA]
    ours = [r for r in rows if r.scenario == scenario and r.autoscaler == CLUSTERSCALER]
    verdicts: list[Verdict] = []
    failed = [r for r in (*ca, *ours) if not r.ok]
    if failed or not ca or not ours:
        what = "; ".join(f"{r.autoscaler} run {r.run}: {r.error}" for r in failed) or (
            "no run of " + (CA if not ca else CLUSTERSCALER))
        return [Verdict("every run completed", False, what)]

    def compare(target: str, attr: str, unit: str, factor: float = 1.0) -> None:
        a, b = _median(ca, attr), _median(ours, attr)
        if a is None or b is None:
            verdicts.append(Verdict(target, False, f"no figure ({CA} {_fmt(a, unit)}, "
                                                   f"{CLUSTERSCALER} {_fmt(b, unit)})"))
            return
        bound = a * factor
        met = b <= bound
        limit = f"{factor}x {CA} {_fmt(a, unit)}" if factor != 1.0 else f"{CA} {_fmt(a, unit)}"
        verdicts.append(Verdict(
            target, met, f"{CLUSTERSCALER} {_fmt(b, unit)} {'<=' if met else '>'} {limit}"))

    known = SCENARIOS.get(scenario)
    kind = known.kind if known is not None else SCALE_UP
    if kind == SCALE_UP:
        compare("decision latency <= CA", "decision_latency_s", "s")
        compare("end to end <= CA", "end_to_end_s", "s")
        compare(f"CPU seconds within {CPU_FACTOR}x CA", "cpu_s", "s", CPU_FACTOR)
    elif kind == STEADY:
        compare("steady loop <= CA", "loop_s", "s")
    compare("peak RSS <= CA", "peak_rss_mib", "MiB")
    pairs = list(zip(sorted(ca, key=lambda r: r.run), sorted(ours, key=lambda r: r.run),
                     strict=False))
    differ = [(a, b) for a, b in pairs if a.decision() != b.decision()]
    ca_reached = {r.decision() for r in ca}
    if differ and len(ca_reached) > 1 and all(r.decision() in ca_reached for r in ours):
        # CA's own runs of the same workload differ (kube-scheduler's timing decides where
        # the last pods land): a run of ours ending where one of CA's ended is not a
        # difference between the two.
        verdicts.append(Verdict(
            "equal decisions", True,
            f"every run of {CLUSTERSCALER} ended as one of {CA}'s did, whose own "
            f"{len(ca)} runs differ: " + " / ".join(
                f"{CA} run {r.run} {_decision_text(r)}" for r in sorted(ca, key=lambda r: r.run))))
    elif differ:
        a, b = differ[0]
        verdicts.append(Verdict(
            "equal decisions", False,
            f"run {a.run}: {CA} {_decision_text(a)}; {CLUSTERSCALER} {_decision_text(b)}"))
    else:
        verdicts.append(Verdict("equal decisions", True,
                                f"{len(pairs)} run(s): {_decision_text(pairs[0][1])}"))
    return verdicts


def _decision_text(row: Row) -> str:
    groups = ", ".join(f"{g} {n:+d}" for g, n in sorted(row.nodes_per_group.items())) or "none"
    return f"nodes {groups}; {row.pods_pending} pods pending"


# --------------------------------------------------------------------------- one run


def autoscaler_command(autoscaler: str, kubeconfig: Path, port: int,
                       flags: Sequence[str]) -> list[str]:
    """The same arguments for both: the kwok provider, the cluster, /metrics on `port`."""
    if autoscaler == CA:
        program = [str(upstreamca.binary_path())]
    elif autoscaler == CLUSTERSCALER:
        program = clusterscaler_command()
    else:
        raise ValueError(f"unknown autoscaler {autoscaler!r}; expected one of {AUTOSCALERS}")
    return [*program, "--cloud-provider=kwok", f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}", f"--address=127.0.0.1:{port}", *flags]


def autoscaler_env(kubeconfig: Path) -> dict[str, str]:
    """Upstream's kwok provider outside a cluster reads these (realcluster-facts)."""
    return {**os.environ, "KWOK_PROVIDER_MODE": "local", "POD_NAMESPACE": NAMESPACE,
            "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"}


def kubectl(kubeconfig: Path, *args: str, input: str | None = None,
            timeout: float = 300) -> str:
    cmd = [str(controlplane.binary("kubectl")), f"--kubeconfig={kubeconfig}", *args]
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if proc.returncode != 0:
        raise ControlPlaneError(f"kubectl {' '.join(args)} exited {proc.returncode}: "
                                f"{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def apply(kubeconfig: Path, objects: list[dict[str, Any]]) -> None:
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-",
            input=json.dumps(as_list(objects)))


def _events(kubeconfig: Path) -> dict[str, tuple[str, int]]:
    """The autoscaler's Events in the cluster now (`event_counts`)."""
    return event_counts(json.loads(kubectl(kubeconfig, "get", "events", "--all-namespaces",
                                           "-o", "json")))


def _log_tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _version(autoscaler: str) -> str:
    if autoscaler == CA:
        return upstreamca.RELEASE
    from bench.run import measured_commit

    return f"clusterscaler {measured_commit()}"


def run_on_cluster(scenario: PeerScenario, autoscaler: str, run: int,
                   cluster: controlplane.Cluster, workdir: Path, *,
                   progress: bool = False) -> Row:
    """One run on a running, empty control plane `cluster`: see the module's docstring."""
    row = Row(scenario.name, autoscaler, run, pods=scenario.pods_at_end,
              version=_version(autoscaler))
    kubeconfig = cluster.kubeconfig
    apply(kubeconfig, provider_objects(scenario))
    existing: list[str] = []
    if scenario.kind in (STEADY, SCALE_DOWN):
        existing = prepare_existing(scenario, cluster, progress=progress)
    port = controlplane.free_port()
    events_before = _events(kubeconfig)
    log = workdir / f"{scenario.name}-{autoscaler}-{run}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            autoscaler_command(autoscaler, kubeconfig, port, scenario.flags),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=autoscaler_env(kubeconfig), start_new_session=True,
        )
    watch: ClusterWatch | None = None
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        before = main_loop(port)
        while before is None or before.count < 1:
            if process.poll() is not None:
                raise ControlPlaneError(f"{autoscaler} exited {process.returncode} before its "
                                        f"first loop:\n{_log_tail(log)}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{autoscaler}: no loop in {READY_TIMEOUT:.0f}s:\n"
                                        f"{_log_tail(log)}")
            time.sleep(0.2)
            before = main_loop(port)
        watch = cluster_watch(cluster, scenario.namespace, GROUP_LABEL, ignore_nodes=existing)
        watch.start()
        startup_cpu = cpu_seconds(process.pid)
        requests_before = api_requests(port) or {}
        started = time.monotonic()
        if scenario.kind == STEADY:
            _observe(scenario, autoscaler, process, log, progress=progress)
            finish(row, watch, process.pid, port, before, startup_cpu, started, None,
                   dict(scenario.existing), requests_before)
            row.events = events_written(events_before, _events(kubeconfig))
            return row
        if scenario.kind == SCALE_DOWN:
            apply(kubeconfig, scaled_down(scenario))
        else:
            apply(kubeconfig, workload_objects(scenario))
        end = started + scenario.timeout_s
        done_at: float | None = None
        next_report = started + PROGRESS_EVERY
        while time.monotonic() < end:
            if progress and time.monotonic() >= next_report:
                next_report += PROGRESS_EVERY
                bound, pending = watch.bound_and_pending()
                print(f"  {time.monotonic() - started:5.0f}s {autoscaler}: "
                      f"{sum(watch.nodes_per_group().values())} nodes added, "
                      f"{len(watch.removals())} removed, {bound} pods bound, {pending} not",
                      file=sys.stderr, flush=True)
            if process.poll() is not None:
                raise ControlPlaneError(f"{autoscaler} exited {process.returncode} during the "
                                        f"run:\n{_log_tail(log)}")
            if done_at is None:
                done_at = run_done_at(scenario, watch)
            if done_at is not None and time.monotonic() >= done_at + scenario.settle_s:
                break
            time.sleep(0.1)
        finish(row, watch, process.pid, port, before, startup_cpu, started, done_at,
               dict(scenario.existing), requests_before)
        row.events = events_written(events_before, _events(kubeconfig))
    finally:
        if watch is not None:
            watch.stop()
        _stop(process)
    return row


def run_done_at(scenario: PeerScenario, watch: ClusterWatch) -> float | None:
    """When the run's work was done, or None while it is not: every pod bound (a scale-up),
    the expected nodes removed (a scale-down)."""
    if scenario.kind == SCALE_DOWN:
        if scenario.expect_removed <= 0:
            return time.monotonic()
        removals = watch.removals()
        if len(removals) >= scenario.expect_removed:
            return removals[scenario.expect_removed - 1]
        return None
    bound, _ = watch.bound_and_pending()
    return watch.last_bound_at if bound >= scenario.pods else None


def finish(row: Row, watch: ClusterWatch, pid: int, port: int, before: LoopMetric,
           startup_cpu: float, started: float, done_at: float | None,
           existing: dict[str, int], requests_before: dict[str, float] | None = None) -> None:
    """Fill `row` at the end of a run: the process's figures first (before anything else
    loads the machine), then the decision from fresh lists."""
    cpu_end = cpu_seconds(pid)
    after = main_loop(port)
    requests_after = api_requests(port)
    if requests_after:
        earlier = requests_before or {}
        row.api_requests = {m: int(n - earlier.get(m, 0.0))
                            for m, n in sorted(requests_after.items())}
    row.peak_rss_mib = round(peak_rss_bytes(pid) / MIB, 1)
    row.startup_cpu_s = round(startup_cpu, 2)
    row.cpu_s = round(cpu_end - startup_cpu, 2)
    first = watch.first_node_at()
    row.decision_latency_s = None if first is None else round(first - started, 2)
    row.end_to_end_s = None if done_at is None else round(done_at - started, 2)
    final = final_state(watch)
    added = dict(final.nodes_per_group)
    for group, count in existing.items():
        added[group] = added.get(group, 0) - count
    # A negative count is a group that lost nodes: a steady scenario's decision too.
    row.nodes_per_group = {g: n for g, n in sorted(added.items()) if n}
    row.nodes_added = sum(n for n in row.nodes_per_group.values() if n > 0)
    row.nodes_removed = -sum(n for n in row.nodes_per_group.values() if n < 0)
    removals = watch.removals()
    if removals:
        row.first_removal_s = round(removals[0] - started, 2)
        row.last_removal_s = round(removals[-1] - started, 2)
    row.pods_pending = row.pods - final.pods_bound
    seen = (watch.nodes_per_group(), watch.bound_and_pending())
    if seen != ({g: n for g, n in row.nodes_per_group.items() if n > 0},
                (final.pods_bound, final.pods_pending)):
        row.note = (f"the watches saw nodes added {seen[0]}, {seen[1][0]} pods bound and "
                    f"{seen[1][1]} not {watch.unbound()}; the lists {row.nodes_per_group}, "
                    f"{final.pods_bound} and {final.pods_pending}; "
                    f"{watch.reconnects} watch reconnects")
    if after is not None and after.count > before.count:
        row.loops = int(after.count - before.count)
        row.loop_s = round((after.total - before.total) / (after.count - before.count), 3)
    if watch.errors:
        row.error = "; ".join(watch.errors[:3])


def prepare_existing(scenario: PeerScenario, cluster: controlplane.Cluster, *,
                     progress: bool) -> list[str]:
    """Make the nodes a steady or scale-down scenario starts with and its workload, and
    wait until every pod is bound, before any autoscaler runs; returns the names of the
    nodes made."""
    nodes = existing_nodes(scenario)
    apply(cluster.kubeconfig, nodes)
    watch = cluster_watch(cluster, scenario.namespace, GROUP_LABEL)
    watch.start()
    try:
        started = time.monotonic()
        if scenario.prebound:
            bind_workload(scenario, cluster, [n["metadata"]["name"] for n in nodes], watch,
                          progress=progress)
        apply(cluster.kubeconfig, workload_objects(scenario))
        deadline = started + scenario.timeout_s
        next_report = started + PROGRESS_EVERY
        while watch.bound_and_pending()[0] < scenario.pods:
            if time.monotonic() > deadline:
                bound = watch.bound_and_pending()[0]
                raise ControlPlaneError(
                    f"{scenario.name}: {bound} of {scenario.pods} pods bound to the "
                    f"{len(nodes)} nodes made after {scenario.timeout_s:.0f}s")
            if progress and time.monotonic() >= next_report:
                next_report += PROGRESS_EVERY
                print(f"  {time.monotonic() - started:5.0f}s setting up: "
                      f"{watch.bound_and_pending()[0]} pods bound", file=sys.stderr, flush=True)
            time.sleep(0.5)
        if scenario.prebound:
            # The ReplicaSets own the pods made for them: they make none of their own.
            time.sleep(5.0)
            pending = watch.bound_and_pending()[1]
            if pending:
                raise ControlPlaneError(
                    f"{scenario.name}: {pending} pods pending beside the {scenario.pods} "
                    "bound by the harness: a ReplicaSet made pods of its own")
    finally:
        watch.stop()
    return [n["metadata"]["name"] for n in nodes]


# Pods per request when the harness binds a workload itself.
BIND_CHUNK = 500


def bind_workload(scenario: PeerScenario, cluster: controlplane.Cluster, node_names: list[str],
                  watch: ClusterWatch, *, progress: bool) -> None:
    """A `prebound` scenario's workload: its pods made bound to `node_names`
    (`bound_pods`), then, once the watch saw them all, each Deployment's ReplicaSet
    (which adopts them); the caller then applies the Deployments, which adopt the
    ReplicaSets."""
    objects = workload_objects(scenario)
    apply(cluster.kubeconfig, [o for o in objects if o["kind"] != "Deployment"])
    pods = bound_pods(scenario, node_names)
    for start in range(0, len(pods), BIND_CHUNK):
        kubectl(cluster.kubeconfig, "create", "-f", "-",
                input=json.dumps(as_list(pods[start:start + BIND_CHUNK])))
        if progress:
            print(f"  setting up: {min(start + BIND_CHUNK, len(pods))} of {len(pods)} pods "
                  "made and bound", file=sys.stderr, flush=True)
    deadline = time.monotonic() + 300.0
    while watch.bound_and_pending()[0] < len(pods):
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{scenario.name}: the watch saw "
                                    f"{watch.bound_and_pending()[0]} of {len(pods)} pods made")
        time.sleep(0.5)
    apply(cluster.kubeconfig, prebound_replica_sets(scenario))


def _observe(scenario: PeerScenario, autoscaler: str, process: subprocess.Popen[bytes],
             log: Path, *, progress: bool) -> None:
    """Let the autoscaler loop over the steady cluster for `observe_s` seconds."""
    if progress:
        print(f"  observing {autoscaler} for {scenario.observe_s:.0f}s", file=sys.stderr,
              flush=True)
    deadline = time.monotonic() + scenario.observe_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ControlPlaneError(f"{autoscaler} exited {process.returncode} during the "
                                    f"run:\n{_log_tail(log)}")
        time.sleep(0.2)


def run_one(scenario: PeerScenario, autoscaler: str, run: int, workdir: Path, *,
            progress: bool = False) -> Row:
    """One run on a fresh control plane, stopped afterwards; a failure becomes the row's
    `error`."""
    root = workdir / f"{scenario.name}-{autoscaler}-{run}"
    try:
        cluster = controlplane.start(root)
    except ControlPlaneError as err:
        return Row(scenario.name, autoscaler, run, pods=scenario.pods_at_end,
                   version=_version(autoscaler), error=f"control plane: {err}")
    try:
        return run_on_cluster(scenario, autoscaler, run, cluster, workdir, progress=progress)
    except (ControlPlaneError, OSError, subprocess.SubprocessError) as err:
        return Row(scenario.name, autoscaler, run, pods=scenario.pods_at_end,
                   version=_version(autoscaler), error=f"{type(err).__name__}: {err}")
    except Exception:
        return Row(scenario.name, autoscaler, run, pods=scenario.pods_at_end,
                   version=_version(autoscaler), error=traceback.format_exc(limit=5))
    finally:
        controlplane.stop(root)


# --------------------------------------------------------------------------- output


FIGURES = (
    ("decision latency", "decision_latency_s", "s"),
    ("end to end", "end_to_end_s", "s"),
    ("CPU, measured span", "cpu_s", "s"),
    ("CPU at start-up", "startup_cpu_s", "s"),
    ("peak RSS", "peak_rss_mib", "MiB"),
    ("main loop (mean)", "loop_s", "s"),
    ("API requests", "api_requests_total", ""),
    ("events written", "events_total", ""),
    ("first node removed", "first_removal_s", "s"),
    ("last node removed", "last_removal_s", "s"),
)


def _cell(rows: Sequence[Row], attr: str, unit: str) -> str:
    values = [getattr(r, attr) for r in rows]
    if not values or all(v is None for v in values):
        return "-"
    median = _median(rows, attr)
    text = _fmt(median, unit)
    if len(values) > 1:
        text += " [" + " ".join("-" if v is None else f"{v:g}" for v in values) + "]"
    return text


def render(rows: Sequence[Row], scenarios: Sequence[str], header: str) -> str:
    lines = [header]
    for name in scenarios:
        scenario = SCENARIOS.get(name)
        ca = [r for r in rows if r.scenario == name and r.autoscaler == CA]
        ours = [r for r in rows if r.scenario == name and r.autoscaler == CLUSTERSCALER]
        lines.append("")
        lines.append(f"{name}: {scenario.title if scenario else ''} "
                     f"({len(ca)} + {len(ours)} runs, medians [runs])")
        lines.append(f"  {'':<24}{CA:<34}{CLUSTERSCALER}")
        for label, attr, unit in FIGURES:
            lines.append(f"  {label:<24}{_cell(ca, attr, unit):<34}{_cell(ours, attr, unit)}")
        for label, group in ((CA, ca), (CLUSTERSCALER, ours)):
            for r in group:
                status = f"error: {r.error.splitlines()[0][:200]}" if r.error else _decision_text(r)
                lines.append(f"  {label} run {r.run}: {status}")
                if r.api_requests:
                    lines.append("    API requests: " + ", ".join(
                        f"{m} {n}" for m, n in r.api_requests.items()))
                if r.events:
                    lines.append("    events written: " + ", ".join(
                        f"{k} {n}" for k, n in r.events.items()))
                if r.note:
                    lines.append(f"    note: {r.note}")
        for verdict in evaluate(name, rows):
            mark = "MET    " if verdict.met else "NOT MET"
            lines.append(f"  {mark} {verdict.target}: {verdict.detail}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- command


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench peer",
        description="Upstream Cluster Autoscaler and clusterscaler on the same real control "
                    "plane, same kwok node groups, same workload.",
    )
    parser.add_argument("--build", action="store_true",
                        help="build upstream CA, its example external gRPC provider service (for "
                             "tests/providers/externalgrpc) and the control plane into the "
                             "cache, then exit")
    parser.add_argument("--ca-source", type=Path, default=None, metavar="PATH",
                        help="a git repository of kubernetes/autoscaler holding "
                             f"{upstreamca.RELEASE}, used when the module proxy refuses CA "
                             f"(default ${upstreamca.SOURCE_ENV})")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        choices=list(SCENARIOS),
                        help=f"run this scenario (repeatable; default all: {', '.join(SCENARIOS)})")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="runs per scenario and autoscaler (default 1)")
    parser.add_argument("--json", action="store_true",
                        help='print one JSON document {"rows": [...], "targets": {...}, ...}')
    parser.add_argument("--work-dir", type=Path, default=None, metavar="DIR",
                        help="keep the control planes' directories, the autoscalers' logs and "
                             "each row as it is measured (DIR/rows.jsonl) here (default: a "
                             "temporary directory, removed)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.build:
        try:
            controlplane.build()
            binary = upstreamca.build(args.ca_source)
        except ControlPlaneError as err:
            print(f"python -m bench peer --build: {err}", file=sys.stderr)
            return 1
        print(binary)
        print(upstreamca.service_path())
        info = upstreamca.BuildInfo.load()
        if info is not None:
            print(json.dumps(asdict(info), indent=2))
        return 0
    if not upstreamca.built():
        print(f"python -m bench peer: upstream CA is not built ({upstreamca.binary_path()} is "
              "missing); run `python -m bench peer --build` first", file=sys.stderr)
        return 2
    from bench.run import machine

    names = args.only or list(SCENARIOS)
    before = machine()
    started = time.time()
    workdir = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-peer-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []

    def interrupted(signum: int, _frame: object) -> None:
        # SIGTERM (or SIGINT where a shell started us in the background with it ignored)
        # unwinds like Ctrl-C, so every autoscaler and control plane started is stopped.
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        for name in names:
            for run in range(1, args.repeat + 1):
                for autoscaler in AUTOSCALERS:
                    print(f"running {name} with {autoscaler} (run {run}) ...",
                          file=sys.stderr, flush=True)
                    row = run_one(SCENARIOS[name], autoscaler, run, workdir, progress=True)
                    rows.append(row)
                    if args.work_dir is not None:
                        # Each row as soon as it is measured: an interrupted command keeps them.
                        with (workdir / "rows.jsonl").open("a") as out:
                            out.write(json.dumps(row.to_json()) + "\n")
    finally:
        signal.signal(signal.SIGTERM, previous)
        if args.work_dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    after = machine()
    info = upstreamca.BuildInfo.load()
    command = " ".join(["python -m bench peer", *(argv if argv is not None else sys.argv[1:])])
    if args.json:
        doc = {
            "rows": [r.to_json() for r in rows],
            "targets": {n: [asdict(v) for v in evaluate(n, rows)] for n in names},
            "machine": before,
            "loadavgAfter": after["loadavg"],
            "command": command,
            "clusterAutoscaler": None if info is None else asdict(info),
            "elapsedSeconds": round(time.time() - started, 1),
        }
        print(json.dumps(doc, indent=2))
    else:
        header = (
            f"machine: {before['cpu']}, {before['cores']} cores, python {before['python']}; "
            f"load {before['loadavg'][0]:.2f} before, {after['loadavg'][0]:.2f} after; "
            f"clusterscaler commit {before['commit']}; {upstreamca.RELEASE} "
            f"({upstreamca.PSEUDO_VERSION}); command: {command}"
        )
        print(render(rows, names, header))
    return 0 if all(r.ok for r in rows) else 1

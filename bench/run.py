"""The benchmark runner: `python -m bench` (or `python bench/run.py`) from the repository root.

For every selected row of `bench.scenarios.ROWS` the runner generates the scenario (a
Kubernetes JSON snapshot and a `sim` cloud-config, deterministic for a seed), then measures
it in a fresh Python process, so that peak RSS belongs to that scenario alone. The worker
does what `clusterscaler simulate --once --json --snapshot S --cloud-config C <flags>`
does, phase by phase, `--repeat` times:

- parse:  read the snapshot and build the model (`load_inputs`);
- build:  options, the in-memory cluster, the `sim` provider and the loop (`prepare`);
- loop:   the simulated cluster's scheduler pass, one `run_once`, the decision document.

and times the floor in the same process, first on a clean heap and again after the runs:
reading the snapshot file and decoding it with `msgspec.json.decode`, the collector held
off (the fastest decode there is: no autoscaler can read the cluster faster). Rows whose
issue 9 target is a ratio to `json.load` also time that. Then the runner times the whole
process, `--repeat` times: a real `clusterscaler simulate --once --json --snapshot S
--cloud-config C <flags>` (interpreter start-up, imports, plugin loading, the loop and
writing its output), which is the `process` column and the numerator of `x floor`.
It reports the median of each figure, the peak RSS, the decision and whether it matches
the scenario's expected one. `--profile DIR` writes a pyinstrument profile of one more
run per scenario.

The `steady-5k` row measures the long-running `run` loop instead (`bench/steady.py`).

Exit status: 0 when every decision matched, 1 when one did not or a worker failed, 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python bench/run.py`: make the repository root importable, as `python -m bench` does.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
import yaml

from bench import steady
from bench.scenarios import DEFAULT_SEED, ROWS, Decision, Expected, Scenario, check, generate
from bench.worker import REPO_ROOT, run_module, run_worker

GIB = 1024**3
ALL_ROWS = [*ROWS, steady.NAME]


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A target of issue 9 or 21 for one row, at scale 1.

    Issue 9's are strict bounds on the in-process phases (`max_seconds`: parse + build +
    loop; `max_json_ratio`: that over `json.load` of the file). Issue 21's are inclusive:
    `max_process_ratio` bounds the whole process over the msgspec floor, `max_loop_seconds`
    the loop phase alone.
    """

    text: str
    max_seconds: float | None = None
    max_json_ratio: float | None = None
    max_rss_bytes: int | None = None
    max_process_ratio: float | None = None
    max_loop_seconds: float | None = None


TARGETS: dict[str, Target] = {
    "scale-up-50k": Target("< 3 s and < 3x json.load", max_seconds=3.0, max_json_ratio=3.0),
    "scale-down-2k": Target("< 10 s", max_seconds=10.0),
    "scale-down-2k-pool": Target("< 10 s", max_seconds=10.0),
    "burst-30k": Target("< 2 s", max_seconds=2.0),
    "empty-300": Target("< 2 s", max_seconds=2.0),
    "mixed-5k": Target("< 2 s (Karpenter: 5.1 s)", max_seconds=2.0),
    "mixed-20k": Target("< 8 s (Karpenter: 35.7 s)", max_seconds=8.0),
    "scale-up-150k": Target("peak RSS < 1.5 GiB", max_rss_bytes=int(1.5 * GIB)),
    "real-scale-up-50k": Target("process <= 3x floor", max_process_ratio=3.0),
    "real-scale-up-150k": Target("process <= 2.5x floor", max_process_ratio=2.5),
    "scale-down-2k-real": Target("loop <= 3 s", max_loop_seconds=3.0),
}
# Families of scaling rows: the loop's time per pod may grow by at most this factor from
# one row to the largest (linear cost keeps it at 1; the slack absorbs a shared machine's
# noise), in every run: run i of the largest row against run i of the other.
LINEAR_SLACK = 1.25
# ... and its function calls per pod, counted rather than timed, by at most this one (fixed
# costs per loop, per node group and per node spread over more pods keep it near 1).
WORK_SLACK = 1.10
SCALING_FAMILIES = {
    "(1) scale-up": ("scale-up-10k", "scale-up-50k", "scale-up-100k", "scale-up-150k"),
    "(3) burst": ("burst-pods-10k", "burst-pods-50k", "burst-pods-100k"),
    "(21) real scale-up": ("real-scale-up-10k", "real-scale-up-50k", "real-scale-up-150k"),
}


@dataclass(frozen=True)
class Pair:
    """Two rows of one shape measured in the same run: the loop of `row` may cost at most
    `max_ratio` times the loop of `baseline`. Once both rows ran, one more process runs
    their loops in turns (`pair_worker`: after a first round kept apart, `--repeat`
    rounds, the order swapped each round), so that the two loops of a round meet the
    same load of a shared machine; their CPU times are compared round by round, and the
    median of those ratios decides. The ratio of the rows' own runs (one worker after
    the other, minutes apart on a loaded machine) is printed beside it."""

    row: str
    baseline: str
    max_ratio: float
    text: str


PAIRS = (
    Pair(
        "dra-claims-10k",
        "dra-plain-10k",
        2.0,
        "pods claiming a device over the same pods without claims",
    ),
)


# --------------------------------------------------------------------------- results


@dataclass
class Measurement:
    """One scenario's figures, as the worker measured them (seconds, bytes)."""

    name: str
    title: str = ""
    nodes: int = 0
    pods: int = 0
    snapshot_bytes: int = 0
    parse: list[float] = field(default_factory=list)
    build: list[float] = field(default_factory=list)
    loop: list[float] = field(default_factory=list)
    loop_cpu: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    floor_after: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    loop_calls: int = 0
    json_floor: list[float] = field(default_factory=list)
    process: list[float] = field(default_factory=list)
    base_rss: int = 0
    peak_rss: int = 0
    rss_after: int = 0
    decision: Decision | None = None
    expected: Expected | None = None
    problems: list[str] = field(default_factory=list)
    error: str = ""
    traceback: str = ""
    profile: str = ""

    @property
    def median_total(self) -> float:
        return statistics.median(self.total) if self.total else float("nan")

    @property
    def median_floor(self) -> float:
        return statistics.median(self.floor) if self.floor else float("nan")

    @property
    def median_process(self) -> float:
        return statistics.median(self.process) if self.process else float("nan")

    @property
    def ratio(self) -> float:
        """The whole process over the floor (issue 21's `x floor`)."""
        floor = self.median_floor
        return self.median_process / floor if floor > 0 else float("nan")

    @property
    def json_ratio(self) -> float:
        """The in-process phases over `json.load` (issue 9's floor)."""
        if not self.json_floor:
            return float("nan")
        return self.median_total / statistics.median(self.json_floor)

    @property
    def ok(self) -> bool:
        return not self.error and not self.problems and self.decision is not None

    def to_json(self) -> dict[str, Any]:
        med = statistics.median
        return {
            "name": self.name,
            "title": self.title,
            "nodes": self.nodes,
            "pods": self.pods,
            "snapshotBytes": self.snapshot_bytes,
            "seconds": {
                "parse": med(self.parse) if self.parse else None,
                "build": med(self.build) if self.build else None,
                "loop": med(self.loop) if self.loop else None,
                "total": med(self.total) if self.total else None,
                "floor": med(self.floor) if self.floor else None,
                "floorAfterRuns": med(self.floor_after) if self.floor_after else None,
                "reference": min(self.reference) if self.reference else None,
                "loopCalls": self.loop_calls or None,
                "jsonLoad": med(self.json_floor) if self.json_floor else None,
                "process": med(self.process) if self.process else None,
                "totalRuns": self.total,
                "loopRuns": self.loop,
                "loopCpuRuns": self.loop_cpu,
                "floorRuns": self.floor,
                "processRuns": self.process,
            },
            "floorRatio": None if not self.process else self.ratio,
            "jsonLoadRatio": None if not self.json_floor else self.json_ratio,
            "baseRssBytes": self.base_rss,
            "peakRssBytes": self.peak_rss,
            "rssAfterRunsBytes": self.rss_after,
            "decision": None if self.decision is None else self.decision.to_json(),
            "decisionText": None if self.decision is None else self.decision.text(),
            "expected": None if self.expected is None else self.expected.text(),
            "matches": self.ok,
            "problems": self.problems,
            "error": self.error,
            "traceback": self.traceback,
            "profile": self.profile,
        }


# --------------------------------------------------------------------------- the worker


def _rss_now() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak if sys.platform == "darwin" else peak * 1024


def decision_of(result: Any) -> Decision:
    """Reduce a `LoopResult` to the figures the scenarios check."""
    from clusterscaler.loop.decisions import DeletionKind, NoScaleUpReason

    groups: dict[str, int] = {}
    for d in result.scale_up.decisions:
        groups[d.node_group] = groups.get(d.node_group, 0) + d.delta
    deleted = [d for d in result.scale_down.deletions if d.ok]
    unfit = sum(
        1
        for rejections in result.scale_up.pods_remaining.values()
        if rejections and all(r.reason is NoScaleUpReason.NOT_SCHEDULABLE for r in rejections)
    )
    errors = list(result.errors)
    if result.halted:
        errors.append(f"halted: {result.halted}")
    if result.scale_up.error:
        errors.append(f"scale-up: {result.scale_up.error}")
    errors.extend(
        f"scale-down: {d.node}: {d.error}" for d in result.scale_down.deletions if not d.ok
    )
    return Decision(
        scale_up_nodes=sum(groups.values()),
        scale_up_groups=groups,
        deleted_nodes=len(deleted),
        deleted_empty=sum(1 for d in deleted if d.kind is DeletionKind.EMPTY),
        unneeded_nodes=len(result.scale_down.unneeded),
        triggered_pods=len(result.scale_up.triggered_pods),
        pending_pods=len(result.pending_pods),
        unfit_pods=unfit,
        errors=tuple(errors),
    )


def _simulate_argv(directory: Path, flags: Sequence[str]) -> list[str]:
    return [
        "--snapshot",
        str(directory / "snapshot.json"),
        "--cloud-config",
        str(directory / "cloud-config.yaml"),
        "--once",
        "--json",
        *flags,
    ]


def reference_runs(scenario: Any, repeat: int) -> list[float]:
    """Seconds of the memory reference: one pass over the scenario's parsed pods, in
    order, building each pod's `namespace/name` key (what the loop does, at the least,
    for every pod). It computes nothing that grows with the cluster, so its cost per pod
    grows only as the pods stop fitting in the processor's caches: the loop's own growth
    is to be read against it."""
    pods = list(scenario.objects.pods)
    times = []
    for _ in range(max(repeat, 3)):
        start = time.perf_counter()
        for pod in pods:
            pod.namespace + "/" + pod.name
        times.append(time.perf_counter() - start)
    return times


class SimulateRun:
    """A scenario directory set up as `clusterscaler simulate --once --json` sets it up
    (plugins loaded, flags parsed, logs quiet), its phases run one by one."""

    def __init__(self, directory: Path) -> None:
        from clusterscaler.commands import cli
        from clusterscaler.commands import simulate as command
        from clusterscaler.report.logs import configure_logging

        self.meta = json.loads((directory / "scenario.json").read_text())
        argv = _simulate_argv(directory, self.meta["flags"])
        host, registry = cli.load_plugins(argv)
        options, self.ns = cli.parse_autoscaler_args(argv, host, registry, "simulate", command)
        configure_logging(options.v, options.logging_format)
        command.quiet_logs(options)
        self.command = command
        self.ctx = cli.CommandContext(host=host, registry=registry, options=options, args=self.ns)

    def load(self) -> Any:
        """The parse phase: the snapshot and cloud-config read into the model."""
        return self.command.load_inputs(self.ns)

    def prepare(self, scenario: Any) -> Any:
        """The build phase: the in-memory cluster, the provider and the loop."""
        sim, _, _ = self.command.prepare(self.ctx, scenario)
        return sim

    @staticmethod
    def loop(sim: Any) -> Any:
        """What `simulate --once` does once built: the scheduler's verdicts stand, then one
        loop and its decision document."""
        from clusterscaler.offline import output

        sim.cluster.step(retry_unschedulable=False)
        result = sim.loop.run_once(sim.clock.now())
        json.dumps(output.decision_json(result))
        return result


def worker(directory: Path, repeat: int, profile_dir: Path | None) -> dict[str, Any]:
    """Measure the scenario in `directory` in this process; returns the figures as JSON."""
    run = SimulateRun(directory)
    meta = run.meta
    loop_cpu: list[float] = []

    def once() -> tuple[float, float, float, Decision]:
        t0 = time.perf_counter()
        scenario = run.load()
        t1 = time.perf_counter()
        sim = run.prepare(scenario)
        t2 = time.perf_counter()
        c2 = time.process_time()
        result = run.loop(sim)
        t3 = time.perf_counter()
        loop_cpu.append(time.process_time() - c2)
        return t1 - t0, t2 - t1, t3 - t2, decision_of(result)

    def loop_calls() -> int:
        """The function calls (Python and built-in) of one loop, counted under cProfile:
        the loop's work, whatever the machine's caches make of its time."""
        sim = run.prepare(run.load())
        profiler = cProfile.Profile()
        profiler.enable()
        run.loop(sim)
        profiler.disable()
        return int(pstats.Stats(profiler).total_calls)  # type: ignore[attr-defined]

    snap = directory / "snapshot.json"

    def floor_runs() -> list[float]:
        """Read and decode the file with msgspec, the collector held off."""
        times = []
        for _ in range(repeat):
            gc.disable()
            try:
                start = time.perf_counter()
                with snap.open("rb") as f:
                    msgspec.json.decode(f.read())
                times.append(time.perf_counter() - start)
            finally:
                gc.enable()
            gc.collect()
        return times

    def json_load_runs() -> list[float]:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            with snap.open("rb") as f:
                json.load(f)
            times.append(time.perf_counter() - start)
            gc.collect()
        return times

    gc.collect()
    base_rss = _rss_now()
    # The floor first, on a clean heap, and again after the runs: a gap between the two
    # would mean the runs leave state behind that slows the next parse.
    floor = floor_runs()
    json_floor = json_load_runs() if meta.get("jsonFloor") else []
    parse: list[float] = []
    build: list[float] = []
    loop: list[float] = []
    decisions: list[Decision] = []
    # A run that raises is reported with the others' figures rather than losing them all.
    failures: list[str] = []
    last_error: BaseException | None = None
    for i in range(repeat):
        try:
            p, b, lo, decision = once()
        except Exception as exc:
            last_error = exc
            where = traceback.extract_tb(exc.__traceback__)[-1]
            failures.append(
                f"run {i + 1}: {type(exc).__name__}: {exc} "
                f"({Path(where.filename).name}:{where.lineno} in {where.name})"
            )
            gc.collect()
            continue
        parse.append(p)
        build.append(b)
        loop.append(lo)
        decisions.append(decision)
        gc.collect()
    if not decisions:
        assert last_error is not None
        raise last_error
    peak = _peak_rss()
    floor_after = floor_runs()
    reference = reference_runs(run.load(), repeat)
    calls = loop_calls()
    rss_after = _rss_now()
    profile = ""
    if profile_dir is not None:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.005)
        profiler.start()
        try:
            once()
        except Exception as exc:
            failures.append(f"profiled run: {type(exc).__name__}: {exc}")
        profiler.stop()
        profile_dir.mkdir(parents=True, exist_ok=True)
        path = profile_dir / f"{meta['name']}.txt"
        path.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
        (profile_dir / f"{meta['name']}.html").write_text(profiler.output_html())
        profile = str(path)
    distinct = {json.dumps(d.to_json(), sort_keys=True) for d in decisions}
    return {
        "parse": parse,
        "build": build,
        "loop": loop,
        # The loop's CPU time (this process's), run by run: what a loaded machine's
        # other jobs move least.
        "loopCpu": loop_cpu[: len(loop)],
        "floor": floor,
        "floorAfterRuns": floor_after,
        "reference": reference,
        "loopCalls": calls,
        "jsonFloor": json_floor,
        "baseRss": base_rss,
        "rssAfterRuns": rss_after,
        "peakRss": peak,
        "decision": decisions[0].to_json(),
        # The loop must decide the same on every run of the same input.
        "consistent": len(distinct) == 1,
        "failures": failures,
        "profile": profile,
    }


def pair_worker(row_dir: Path, baseline_dir: Path, rounds: int) -> dict[str, Any]:
    """The loops of a pair's two scenarios measured in turns in this process: a first
    round (each loop once, its figures kept apart: the process's first loops import and
    compile what later loops find ready), then `rounds` rounds, the order swapped from
    one round to the next, so that both sides of a round meet the same machine load.
    Returns each side's loop CPU time by round, and whether each side decided alike
    every time."""
    runs = {"row": SimulateRun(row_dir), "baseline": SimulateRun(baseline_dir)}
    cpu: dict[str, list[float]] = {"row": [], "baseline": []}
    first: dict[str, float] = {}
    decided: dict[str, set[str]] = {"row": set(), "baseline": set()}
    for i in range(rounds + 1):
        for side in ("row", "baseline") if i % 2 == 0 else ("baseline", "row"):
            run = runs[side]
            sim = run.prepare(run.load())
            gc.collect()
            start = time.process_time()
            result = run.loop(sim)
            spent = time.process_time() - start
            if i:
                cpu[side].append(spent)
            else:
                first[side] = spent
            decided[side].add(json.dumps(decision_of(result).to_json(), sort_keys=True))
            del sim, result
            gc.collect()
    return {
        "rowCpu": cpu["row"],
        "baselineCpu": cpu["baseline"],
        "firstRowCpu": first["row"],
        "firstBaselineCpu": first["baseline"],
        "consistent": all(len(d) == 1 for d in decided.values()),
    }


# --------------------------------------------------------------------------- the parent


def write_scenario(scenario: Scenario, directory: Path) -> int:
    """Write the snapshot, cloud-config and metadata of `scenario`; returns snapshot bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    snap = directory / "snapshot.json"
    snap.write_bytes(msgspec.json.encode(scenario.snapshot))
    (directory / "cloud-config.yaml").write_text(
        yaml.safe_dump(scenario.cloud_config, sort_keys=False), encoding="utf-8"
    )
    meta = {
        "name": scenario.name,
        "title": scenario.title,
        "nodes": scenario.nodes,
        "pods": scenario.pods,
        "flags": list(scenario.flags),
        "jsonFloor": (target := TARGETS.get(scenario.name)) is not None
        and target.max_json_ratio is not None,
    }
    (directory / "scenario.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return snap.stat().st_size


def measure(
    name: str,
    *,
    scale: float,
    seed: int,
    repeat: int,
    data_dir: Path,
    profile_dir: Path | None,
    timeout: float,
) -> Measurement:
    """Generate scenario `name`, run the worker on it in a fresh process, check the decision."""
    scenario = generate(name, scale, seed)
    m = Measurement(name=name, title=scenario.title, nodes=scenario.nodes, pods=scenario.pods)
    m.expected = scenario.expected
    directory = scenario_dir(data_dir, name, scale, seed)
    m.snapshot_bytes = write_scenario(scenario, directory)
    del scenario
    outcome = run_worker("bench.run", directory, repeat, profile_dir, timeout)
    if outcome.doc is None:
        m.error, m.traceback = outcome.error, outcome.traceback
        return m
    doc = outcome.doc
    m.parse, m.build, m.loop, m.floor = doc["parse"], doc["build"], doc["loop"], doc["floor"]
    m.total = [p + b + lo for p, b, lo in zip(m.parse, m.build, m.loop, strict=True)]
    m.base_rss, m.peak_rss = doc["baseRss"], doc["peakRss"]
    m.floor_after, m.rss_after = doc["floorAfterRuns"], doc["rssAfterRuns"]
    m.reference = doc.get("reference", [])
    m.loop_cpu = doc.get("loopCpu", [])
    m.loop_calls = doc.get("loopCalls", 0)
    m.decision = Decision.from_json(doc["decision"])
    m.profile = doc["profile"]
    m.problems = check(m.expected, m.decision)
    if not doc["consistent"]:
        m.problems.append("the decision differed between runs of the same input")
    m.problems.extend(f"failed {f}" for f in doc.get("failures", ()))
    m.json_floor = doc["jsonFloor"]
    m.process, problem = time_process(directory, repeat, timeout)
    if problem:
        m.problems.append(problem)
    return m


def scenario_dir(data_dir: Path, name: str, scale: float, seed: int) -> Path:
    return data_dir / f"{name}-x{scale:g}-seed{seed}"


@dataclass
class PairMeasurement:
    """A pair's loops measured in turns in one process (`pair_worker`)."""

    pair: Pair
    row_cpu: list[float] = field(default_factory=list)
    baseline_cpu: list[float] = field(default_factory=list)
    first_row_cpu: float = 0.0
    first_baseline_cpu: float = 0.0
    consistent: bool = True
    error: str = ""

    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.row_cpu, self.baseline_cpu, strict=True) if b > 0]

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.pair.row,
            "baseline": self.pair.baseline,
            "rowCpu": self.row_cpu,
            "baselineCpu": self.baseline_cpu,
            "firstRowCpu": self.first_row_cpu,
            "firstBaselineCpu": self.first_baseline_cpu,
            "ratios": self.ratios(),
            "consistent": self.consistent,
            "error": self.error,
        }


def measure_pairs(
    results: dict[str, Measurement], *, scale: float, seed: int, repeat: int, data_dir: Path,
    timeout: float,
) -> list[PairMeasurement]:
    """Each pair whose two rows were measured in this run, measured again in turns in one
    fresh process (`pair_worker`) on the scenarios the rows wrote."""
    out = []
    for pair in PAIRS:
        row, base = results.get(pair.row), results.get(pair.baseline)
        if row is None or base is None or row.error or base.error:
            continue
        m = PairMeasurement(pair)
        outcome = run_module("bench.run", [
            "--worker-pair",
            str(scenario_dir(data_dir, pair.row, scale, seed)),
            str(scenario_dir(data_dir, pair.baseline, scale, seed)),
            "--repeat", str(repeat),
        ], timeout)
        if outcome.doc is None:
            m.error = outcome.error
        else:
            doc = outcome.doc
            m.row_cpu, m.baseline_cpu = doc["rowCpu"], doc["baselineCpu"]
            m.first_row_cpu, m.first_baseline_cpu = doc["firstRowCpu"], doc["firstBaselineCpu"]
            m.consistent = doc["consistent"]
        out.append(m)
    return out


def clusterscaler_command() -> list[str]:
    """How to start `clusterscaler`: the console script next to this interpreter, else
    the same entry point through `python -c`."""
    script = Path(sys.executable).with_name("clusterscaler")
    if script.exists():
        return [str(script)]
    entry = "import sys; from clusterscaler.commands.cli import main; sys.exit(main())"
    return [sys.executable, "-c", entry]


def time_process(directory: Path, repeat: int, timeout: float) -> tuple[list[float], str]:
    """Wall time of `repeat` whole `clusterscaler simulate --once --json` processes on the
    scenario in `directory` (their output written to a file there)."""
    meta = json.loads((directory / "scenario.json").read_text())
    cmd = [*clusterscaler_command(), "simulate", *_simulate_argv(directory, meta["flags"])]
    times: list[float] = []
    for i in range(repeat):
        with (directory / "output.json").open("wb") as out:
            start = time.perf_counter()
            try:
                proc = subprocess.run(
                    cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.PIPE, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired:
                return times, f"process run {i + 1}: timed out after {timeout:g} s"
            elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            last = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
            return times, f"process run {i + 1}: exit status {proc.returncode}: {' '.join(last)}"
        times.append(elapsed)
    return times, ""


def scale_note(scale: float) -> str:
    """Targets are set for scale 1; at another scale the verdict is only indicative."""
    return "" if scale == 1.0 else f" (scale {scale:g}; the target is for scale 1)"


def target_verdict(m: Measurement, scale: float) -> str:
    target = TARGETS.get(m.name)
    if target is None:
        return ""
    if not m.total:
        return f"{target.text}: not measured"
    met = True
    if target.max_seconds is not None:
        met &= m.median_total < target.max_seconds
    if target.max_json_ratio is not None:
        met &= m.json_ratio < target.max_json_ratio
    if target.max_rss_bytes is not None:
        met &= m.peak_rss < target.max_rss_bytes
    if target.max_process_ratio is not None:
        met &= bool(m.process) and m.ratio <= target.max_process_ratio
    if target.max_loop_seconds is not None:
        met &= statistics.median(m.loop) <= target.max_loop_seconds
    return f"{target.text}: {'MET' if met else 'NOT MET'}{scale_note(scale)}"


def _growths(small: Measurement, large: Measurement) -> list[float]:
    """The loop's time per pod of `large` over `small`, run by run."""
    runs = min(len(small.loop), len(large.loop))
    return [(large.loop[i] / large.pods) / (small.loop[i] / small.pods) for i in range(runs)]


def _calls_growth(small: Measurement, large: Measurement) -> tuple[float, float] | None:
    """The loop's function calls per pod at `small` and at `large` (None: not counted)."""
    if not (small.loop_calls and large.loop_calls):
        return None
    return small.loop_calls / small.pods, large.loop_calls / large.pods


def _by_run(growths: list[float]) -> str:
    return "x" + ", x".join(f"{g:.2f}" for g in growths) + " by run"


def scaling_verdicts(results: dict[str, Measurement], scale: float = 1.0) -> list[str]:
    """Per family of scaling rows, whether the loop is linear (issue 21, target 3).

    The loop's time per pod is compared run by run (run i of one row against run i of
    the other; met only when every run meets it). From the smallest row (10,000 pods),
    whose working set fits in this machine's 32 MiB L3 cache, to the largest, whose does
    not, that ratio measures the caches as much as the loop: a pass that does the same
    work for every pod (the memory reference) grows x2 to x4. So the verdict of a family
    of three rows or more is taken where the caches do not decide it:

    - time: the loop's time per pod from the second row (50,000 pods, out of the caches
      as the largest is) to the largest, <= x`LINEAR_SLACK` in every run; it catches work
      that grows inside C calls (a membership test in a list, say);
    - work: the loop's function calls per pod, counted under cProfile, from the smallest
      row to the largest, <= x`WORK_SLACK`; counted, not timed, so no noise and no cache.

    The ratio from the smallest row is printed beside them with the memory reference, and
    decides the verdict only for a family measured on two rows."""
    lines = []
    for family, names in SCALING_FAMILIES.items():
        rows = [results[n] for n in names if n in results and results[n].loop]
        if len(rows) < 2:
            continue
        small, large = rows[0], rows[-1]
        steps = ", ".join(
            f"{r.pods:,} pods {statistics.median(r.loop) / r.pods * 1e6:.1f} us/pod loop"
            + (f" ({r.median_process / r.pods * 1e6:.1f} process)" if r.process else "")
            for r in rows
        )
        lines.append(f"{family}: {steps}")
        growths = _growths(small, large)
        met = sum(1 for g in growths if g <= LINEAR_SLACK)
        reference = ""
        if small.reference and large.reference:
            # min: the reference pass has no state, so its fastest run is its cost.
            growth = (min(large.reference) / large.pods) / (min(small.reference) / small.pods)
            reference = f"; memory reference (one pass building each pod's key) x{growth:.2f}"
        if len(rows) >= 3:
            past = _growths(rows[1], large)
            past_met = sum(1 for g in past if g <= LINEAR_SLACK)
            calls = _calls_growth(small, large)
            if calls is None:
                work, work_met = "function calls per pod not counted", False
            else:
                work_growth = calls[1] / calls[0]
                work_met = work_growth <= WORK_SLACK
                work = (
                    f"function calls per pod from {small.pods:,} pods {calls[0]:.1f} -> "
                    f"{calls[1]:.1f} (x{work_growth:.2f}, <= x{WORK_SLACK})"
                )
            verdict = "MET" if past_met == len(past) and work_met else "NOT MET"
            lines.append(
                f"  target 3 (linear): loop per-pod cost from {rows[1].pods:,} pods "
                f"{_by_run(past)} (<= x{LINEAR_SLACK}: {past_met} runs out of {len(past)}); "
                f"{work}: {verdict}{scale_note(scale)}"
            )
            lines.append(
                f"  from {small.pods:,} pods, inside the caches: loop per-pod cost "
                f"{_by_run(growths)} (<= x{LINEAR_SLACK}: {met} runs out of {len(growths)})"
                f"{reference}"
            )
        else:
            verdict = "MET" if met == len(growths) else "NOT MET"
            lines.append(
                f"  target 3 (linear), from {small.pods:,} pods: loop per-pod cost "
                f"{_by_run(growths)}, <= x{LINEAR_SLACK} in every run: {verdict} "
                f"({met} runs out of {len(growths)}){reference}{scale_note(scale)}"
            )
    return lines


def pair_verdicts(
    results: dict[str, Measurement], measured: Sequence[PairMeasurement], scale: float = 1.0
) -> list[str]:
    """Per pair measured in this run, the loop's cost of one over the other: the verdict
    from the loops measured in turns (`pair_worker`), the rows' own runs beside it."""
    lines = []
    for m in measured:
        pair = m.pair
        row, base = results[pair.row], results[pair.baseline]
        head = f"{pair.row} / {pair.baseline} ({pair.text})"
        if m.error:
            lines.append(f"{head}: the loops in turns failed: {m.error}")
            continue
        ratios = m.ratios()
        if not ratios:
            continue
        median = statistics.median(ratios)
        verdict = "MET" if median <= pair.max_ratio else "NOT MET"
        if not m.consistent:
            verdict += " (a side decided differently from one round to another)"
        rows = [a / b for a, b in zip(row.loop_cpu, base.loop_cpu, strict=False) if b > 0]
        walls = [a / b for a, b in zip(row.loop, base.loop, strict=False) if b > 0]
        first = m.first_row_cpu / m.first_baseline_cpu if m.first_baseline_cpu > 0 else 0.0
        lines.append(
            f"{head}: loop CPU in turns {statistics.median(m.row_cpu):.3f} s / "
            f"{statistics.median(m.baseline_cpu):.3f} s, {_by_run(ratios)}, median "
            f"x{median:.2f} (<= x{pair.max_ratio:g}): {verdict}{scale_note(scale)}; "
            f"the process's first loops x{first:.2f}"
            + (
                f"; the rows' own runs x{statistics.median(rows):.2f} by CPU, "
                f"x{statistics.median(walls):.2f} by wall"
                if rows and walls else ""
            )
        )
    return lines


def _fmt_s(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "-"


def render_table(results: Sequence[Measurement], scale: float) -> str:
    header = (
        "| scenario | nodes | pods | floor s | process s | x floor | parse s | build s "
        "| loop s | in-process s | peak RSS MiB | decision | expected | target |"
    )
    lines = [header, "|" + "---|" * 14]
    for m in results:
        if m.error:
            error = m.error.replace("|", "/")
            lines.append(
                f"| {m.name} | {m.nodes:,} | {m.pods:,} | " + "- | " * 8
                + f"{error} | {m.expected.text() if m.expected else ''} | |"
            )
            continue
        decision = m.decision.text() if m.decision else "-"
        verdict = "matches" if m.ok else "MISMATCH: " + "; ".join(m.problems).replace("|", "/")
        lines.append(
            f"| {m.name} | {m.nodes:,} | {m.pods:,} | {_fmt_s(m.floor)} | {_fmt_s(m.process)} "
            f"| {m.ratio:.1f} | {_fmt_s(m.parse)} | {_fmt_s(m.build)} | {_fmt_s(m.loop)} "
            f"| {_fmt_s(m.total)} | {m.peak_rss / 2**20:,.0f} | {decision} | {verdict} "
            f"| {target_verdict(m, scale)} |"
        )
    return "\n".join(lines)


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def measured_commit() -> str:
    """The short commit of the clusterscaler under measurement: the checkout's HEAD, else
    (a tree unpacked onto PYTHONPATH, a wheel) the commit its build recorded."""
    head = _git("rev-parse", "--short", "HEAD")
    if head:
        return head
    from clusterscaler.buildinfo import commit

    recorded = commit()
    return recorded[:7] if recorded != "unknown" else recorded


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "commit": measured_commit(),
        # The code under measurement may differ from the commit in a shared working tree.
        "uncommittedFiles": len(_git("status", "--porcelain", "--", "core", "plugins").splitlines()),
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": list(load),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Benchmarks of clusterscaler at upstream scale."
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"Run only this scenario (repeatable). One of: {', '.join(ALL_ROWS)}.",
    )
    parser.add_argument("--scale", type=float, default=None, help="Multiply every size (0.1 for a quick run; default 1).")
    parser.add_argument("--repeat", type=int, default=None, help="Runs per scenario; the median is reported (default 5).")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="Seed of the generators.")
    parser.add_argument("--no-scaling", action="store_true", help="Skip the pod scaling rows.")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="A quick look at every row: --scale 0.1 --repeat 1 unless given.",
    )
    parser.add_argument("--json", action="store_true", help="Print one JSON document instead of a table.")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "clusterscaler-bench",
        help="Where generated snapshots and cloud-configs are written.",
    )
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR", help="Write a pyinstrument profile per scenario to DIR.")
    parser.add_argument("--timeout", type=float, default=1800.0, help="Seconds a scenario may take in all.")
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-pair", type=Path, nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.scale is None:
        args.scale = 0.1 if args.quick else 1.0
    if args.repeat is None:
        args.repeat = 1 if args.quick else 5
    unknown = [n for n in args.only if n not in ALL_ROWS]
    if unknown:
        parser.error(f"--only {unknown[0]}: expected one of {', '.join(ALL_ROWS)}")
    if not args.scale > 0:
        parser.error(f"--scale: expected a positive number, got {args.scale}")
    if args.repeat < 1:
        parser.error(f"--repeat: expected at least 1, got {args.repeat}")
    if args.profile is not None and importlib.util.find_spec("pyinstrument") is None:
        parser.error("--profile: needs pyinstrument; install it with `pip install pyinstrument`")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker_pair is not None:
        row_dir, baseline_dir = args.worker_pair
        doc = pair_worker(row_dir, baseline_dir, args.repeat)
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    if args.worker is not None:
        doc = worker(args.worker, args.repeat, args.profile)
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    names = args.only or [
        *(n for n, row in ROWS.items() if not (args.no_scaling and row.scaling)),
        steady.NAME,
    ]
    started = time.time()
    before = machine()
    results: dict[str, Measurement] = {}
    steady_result: steady.SteadyResult | None = None
    for name in names:
        if not args.json:
            print(f"running {name} ...", file=sys.stderr, flush=True)
        if name == steady.NAME:
            steady_result = steady.measure(
                scale=args.scale,
                seed=args.seed,
                repeat=args.repeat,
                data_dir=args.data_dir,
                timeout=args.timeout,
                profile_dir=args.profile,
            )
            continue
        results[name] = measure(
            name,
            scale=args.scale,
            seed=args.seed,
            repeat=args.repeat,
            data_dir=args.data_dir,
            profile_dir=args.profile,
            timeout=args.timeout,
        )
    after = machine()
    rows = list(results.values())
    scaling = scaling_verdicts(results, args.scale)
    measured_pairs = measure_pairs(
        results, scale=args.scale, seed=args.seed, repeat=args.repeat,
        data_dir=args.data_dir, timeout=args.timeout,
    )
    pairs = pair_verdicts(results, measured_pairs, args.scale)
    if args.json:
        doc = {
            "machine": before,
            "loadavgAfter": after["loadavg"],
            "command": " ".join(["python -m bench", *(argv if argv is not None else sys.argv[1:])]),
            "scale": args.scale,
            "repeat": args.repeat,
            "seed": args.seed,
            "elapsedSeconds": time.time() - started,
            "scenarios": [m.to_json() for m in rows],
            "targets": {m.name: target_verdict(m, args.scale) for m in rows if m.name in TARGETS},
            "scaling": scaling,
            "pairs": pairs,
            "pairMeasurements": [m.to_json() for m in measured_pairs],
            "steady": None if steady_result is None else steady_result.to_json(),
        }
        print(json.dumps(doc, indent=2))
    else:
        print(
            f"machine: {before['cpu']}, {before['cores']} cores, python {before['python']}; "
            f"load {before['loadavg'][0]:.2f} before, {after['loadavg'][0]:.2f} after; "
            f"commit {before['commit']} ({before['uncommittedFiles']} uncommitted files "
            "in core/ and plugins/)"
        )
        print(f"scale {args.scale:g}, median of {args.repeat}, seed {args.seed}\n")
        if rows:
            print(render_table(rows, args.scale))
        for line in [*scaling, *pairs]:
            print(line)
        if steady_result is not None:
            print("\n".join(steady_result.lines()))
            if steady_result.traceback:
                print(f"\n{steady.NAME}: the worker failed:\n{steady_result.traceback}")
        for m in rows:
            if m.traceback:
                print(f"\n{m.name}: the worker failed:\n{m.traceback}")
    ok = (
        all(m.ok for m in rows)
        and all(not p.error and p.consistent for p in measured_pairs)
        and (steady_result is None or steady_result.ok)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

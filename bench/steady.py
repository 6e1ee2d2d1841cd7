"""The long-running loop on a big, steady cluster: issue 21's target 4 (row `steady-5k`).

`python -m bench --only steady-5k` (or `python -m bench.steady`) generates a steady cluster
of 5,000 nodes in three zone groups, each running 30 real-shaped pods
(`bench.scenarios.realpods`: 150,000 pods of 50 Deployments, one in four with a PDB, at
about 66% of the nodes' cpu), written as the API server's list pages (500 objects a page,
as the informers ask for them). The files are kept in `--data-dir` and reused while the
generator is unchanged.

A fresh worker process then goes the way `clusterscaler run` goes, with `--dry-run` so that
the cluster stays steady: the command-line flags parsed by the CLI, `KubeRuntime` with its
`KubeClusterSource` (one informer per resource) and dry-run actions, the `sim` provider
against the API (it lists the Nodes on every loop), the autoscaler built from the
registry with a `ThreadedExecutor`, and after each loop `runtime.report`. Its API client
is the official `kubernetes` client, whose HTTP `request` answers from the page files
(lists, with `limit` and `continue`), with an empty list or a 404 for reads of anything
else, and by echoing the body of any write. The informers list every resource page by page
(`Informer.list_once`, as on start-up), and new pods reach the pod cache as watch events
(`Informer._apply` of decoded event lines, as `watch_once` applies them).

Figures (each loop is timed around `Autoscaler.run_once`, the span the autoscaler's own
`function_duration_seconds{function="main"}` covers):

- (a) loops where nothing changes, after the first: each <= 1 s;
- (b) a loop after 1,000 new pending pods appear (a Deployment whose nodeSelector only an
  empty `batch` group can satisfy): <= 2 s;
- (c) a scale-down evaluation of every node with upstream's benchmark flags
  (--scale-down-unneeded-time=0s, --scale-down-delay-after-add=0s,
  --scale-down-utilization-threshold=0.7 so that every node is a candidate, parallelism
  and candidate counts of every node): <= 5 s;
- (d) RSS of the process holding the cluster, after the loops: <= 1 GiB (the peak, which
  includes the relists below, is printed beside it);
- (e) a relist of the pods (every page read and parsed into a new cache, swapped in) over
  the floor: reading the same pages and decoding them with `msgspec.json.decode`, the
  collector held off: <= 1.5x.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import yaml

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scenarios import real
from bench.scenarios.realpods import Deployment
from bench.worker import run_worker

GIB = 1024**3
PAGE = 500
# Bump when the generated cluster changes, so that kept files are made again.
GENERATOR_VERSION = "2"
NAME = "steady-5k"
BATCH_GROUP = "batch"

# Steady pods: 300m / 1Gi plus the 50m / 64Mi sidecar, 30 to a 16 cpu node: 66% of its cpu.
POD_CPU = "300m"
POD_MEMORY = "1Gi"
PODS_PER_NODE = 30
NEW_PENDING = 1_000

TARGET_STEADY_S = 1.0
TARGET_NEW_PODS_S = 2.0
TARGET_SCALE_DOWN_S = 5.0
TARGET_RSS = GIB
TARGET_RELIST_RATIO = 1.5


# --------------------------------------------------------------------------- generation


def sizes(scale: float) -> tuple[int, int]:
    """Nodes and new pending pods at `scale`."""
    return max(3, round(5_000 * scale)), max(10, round(NEW_PENDING * scale))


def _list_doc(kind: str, items: Sequence[Any], rv: str, cont: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "items": items}


def _write_pages(directory: Path, resource_name: str, kind: str, items: Sequence[Any]) -> int:
    """`<resource>-all.json` and `<resource>-<page>.json` pages of `PAGE` items."""
    rv = "900000"
    encode = msgspec.json.encode
    (directory / f"{resource_name}-all.json").write_bytes(encode(_list_doc(kind, items, rv)))
    pages = max(1, -(-len(items) // PAGE))
    for p in range(pages):
        cont = str(p + 1) if p + 1 < pages else ""
        doc = _list_doc(kind, items[p * PAGE : (p + 1) * PAGE], rv, cont)
        (directory / f"{resource_name}-{p}.json").write_bytes(encode(doc))
    return pages


def generate(directory: Path, scale: float, seed: int) -> dict[str, Any]:
    """Write the steady cluster's list pages, the new pods' watch events and the
    cloud-config into `directory` (kept and reused for the same scale, seed and generator)."""
    stamp = directory / "generated.json"
    nodes, pending = sizes(scale)
    want = {"version": GENERATOR_VERSION, "scale": scale, "seed": seed, "nodes": nodes}
    if stamp.exists():
        meta = json.loads(stamp.read_text())
        if {k: meta.get(k) for k in want} == want:
            return dict(meta)
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    node_items, pods, replica_sets, pdbs = real.steady_cluster(
        nodes, PODS_PER_NODE, POD_CPU, POD_MEMORY, seed
    )
    batch = Deployment(
        name="batch-render",
        namespace="batch",
        cpu="1900m",
        memory="3Gi",
        replicas=pending,
        seed=seed,
        node_selector={"workload": BATCH_GROUP},
    )
    replica_sets.append(batch.replica_set())
    import random

    rng = random.Random(f"{seed}/pending")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    new_pods = [batch.pod(rng, 950_000 + i, now) for i in range(pending)]
    pod_pages = _write_pages(directory, "pods", "PodList", pods)
    _write_pages(directory, "nodes", "NodeList", node_items)
    _write_pages(directory, "replicasets", "ReplicaSetList", replica_sets)
    _write_pages(directory, "poddisruptionbudgets", "PodDisruptionBudgetList", pdbs)
    encode = msgspec.json.encode
    (directory / "added.jsonl").write_bytes(
        b"\n".join(encode({"type": "ADDED", "object": p}) for p in new_pods) + b"\n"
    )
    (directory / "deleted.jsonl").write_bytes(
        b"\n".join(encode({"type": "DELETED", "object": p}) for p in new_pods) + b"\n"
    )
    (directory / "cloud-config.yaml").write_text(
        yaml.safe_dump(real._cloud_config((BATCH_GROUP,)), sort_keys=False), encoding="utf-8"
    )
    meta = {
        **want,
        "pods": len(pods),
        "podPages": pod_pages,
        "newPods": pending,
        "podBytes": sum(
            (directory / f"pods-{p}.json").stat().st_size for p in range(pod_pages)
        ),
        "generateSeconds": time.perf_counter() - started,
    }
    stamp.write_text(json.dumps(meta, indent=2))
    return meta


# --------------------------------------------------------------------------- the fake API


class _Response:
    """What `urllib3` would hand the `kubernetes` client."""

    def __init__(self, status: int, data: bytes) -> None:
        self.status = status
        self.reason = "OK" if status < 400 else "Not Found"
        self.data = data

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return "application/json" if name.lower() == "content-type" else default

    def getheaders(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


LIST_PATHS = {
    "/api/v1/pods": "pods",
    "/api/v1/nodes": "nodes",
    "/apis/apps/v1/replicasets": "replicasets",
    "/apis/policy/v1/poddisruptionbudgets": "poddisruptionbudgets",
}
EMPTY_LIST = b'{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"900000"},"items":[]}'


def fake_api_client(directory: Path) -> Any:
    """The `kubernetes` client, its HTTP requests answered from the files in `directory`."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    class FileApiClient(client.ApiClient):  # type: ignore[misc]
        requests: list[tuple[str, str]] = []

        def request(self, method: str, url: str, query_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            parts = urlsplit(url)
            query = dict(query_params or [])
            query.update({k: v[-1] for k, v in parse_qs(parts.query).items()})
            path = parts.path
            self.requests.append((method, path))
            if method != "GET":
                body = kwargs.get("body")
                return _Response(201 if method == "POST" else 200, json.dumps(body or {}).encode())
            resource_name = LIST_PATHS.get(path)
            if resource_name is None:
                if path.count("/") > 3 and not path.endswith("s"):
                    raise ApiException(status=404, reason="Not Found")
                return _Response(200, EMPTY_LIST)
            if "fieldSelector" in query:
                return _Response(200, EMPTY_LIST)
            if "limit" not in query:
                return _Response(200, (directory / f"{resource_name}-all.json").read_bytes())
            page = int(query.get("continue") or 0)
            return _Response(200, (directory / f"{resource_name}-{page}.json").read_bytes())

    configuration = client.Configuration()
    configuration.host = "https://steady.bench.invalid"
    return FileApiClient(configuration)


# --------------------------------------------------------------------------- the worker


def _rss_now() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def run_flags(directory: Path) -> list[str]:
    return [
        "--cloud-provider=sim",
        f"--cloud-config={directory / 'cloud-config.yaml'}",
        "--dry-run=true",
        "--expander=least-waste",
        "--max-nodes-total=20000",
        "--v=1",
    ]


def scale_down_flags(nodes: int) -> list[str]:
    return [
        "--scale-down-unneeded-time=0s",
        "--scale-down-delay-after-add=0s",
        "--scale-down-utilization-threshold=0.7",
        f"--max-scale-down-parallelism={nodes}",
        f"--max-drain-parallelism={nodes}",
        f"--scale-down-non-empty-candidates-count={nodes}",
        "--scale-down-simulation-timeout=60s",
    ]


def _problems(result: Any) -> list[str]:
    """What went wrong in a loop: errors, a halt, stale caches."""
    problems = [str(e) for e in result.errors]
    if result.halted:
        problems.append(f"halted: {result.halted}")
    problems.extend(f"stale: {c}" for c in result.stale_caches)
    return problems


def _profile(profile_dir: Path, name: str, fn: Any) -> str:
    """Run `fn()` under pyinstrument; write its text and HTML reports into `profile_dir`."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.005)
    profiler.start()
    try:
        fn()
    finally:
        profiler.stop()
    profile_dir.mkdir(parents=True, exist_ok=True)
    path = profile_dir / f"{NAME}-{name}.txt"
    path.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    (profile_dir / f"{NAME}-{name}.html").write_text(profiler.output_html())
    return str(path)


def worker(directory: Path, repeat: int, profile_dir: Path | None = None) -> dict[str, Any]:
    from clusterscaler.commands import cli
    from clusterscaler.commands import run as run_command
    from clusterscaler.commands.runtime import KubeRuntime
    from clusterscaler.kube.source import KubeClusterSource
    from clusterscaler.loop.autoscaler import Autoscaler
    from clusterscaler.loop.scaledown.executor import ThreadedExecutor
    from clusterscaler.model import decode_json
    from clusterscaler.report.logs import configure_logging

    meta = json.loads((directory / "generated.json").read_text())
    nodes = int(meta["nodes"])
    api = fake_api_client(directory)

    def context(extra: Sequence[str]) -> cli.CommandContext:
        argv = [*run_flags(directory), *extra]
        host, registry = cli.load_plugins(argv)
        options, ns = cli.parse_autoscaler_args(argv, host, registry, "run", run_command, warn=False)
        return cli.CommandContext(host=host, registry=registry, options=options, args=ns)

    ctx = context([])
    configure_logging(0, ctx.options.logging_format)
    runtime = KubeRuntime.from_options(ctx.options, api_client=api, serve=False)
    # Nothing watches here, so the caches would turn stale `stale_after` seconds after
    # their list; the bench feeds them every change, as an open watch would.
    runtime = dataclasses.replace(
        runtime,
        source=KubeClusterSource(api, namespace=ctx.options.namespace, stale_after=3600.0),
    )
    source = runtime.source
    gc.collect()
    base_rss = _rss_now()
    start = time.perf_counter()
    for informer in source.informers.values():
        informer.list_once()
    sync_seconds = time.perf_counter() - start

    def autoscaler(c: cli.CommandContext) -> Autoscaler:
        provider = run_command.build_provider(c, api, lambda: True)
        return Autoscaler.from_registry(
            c.registry,
            options=c.options,
            provider=provider,
            source=source,
            actions=run_command.GuardedActions(runtime.actions, lambda: True),
            executor=ThreadedExecutor(),
        )

    # The collector runs when it would in `run`: held off inside `run_once`, free between
    # loops. Each iteration (the loop, `runtime.report`, and a collection if one falls
    # due) is timed too, as `run_loop` spends it before waiting for the next loop.
    iterations: list[float] = []

    def loop(a: Autoscaler) -> tuple[float, Any]:
        started = time.perf_counter()
        result = a.run_once(datetime.now(UTC))
        seconds = time.perf_counter() - started
        runtime.report(result)
        iterations.append(time.perf_counter() - started)
        return seconds, result

    errors: list[str] = []
    steady = autoscaler(ctx)
    first, result = loop(steady)
    errors.extend(_problems(result))
    steady_loops = []
    for _ in range(repeat):
        seconds, result = loop(steady)
        steady_loops.append(seconds)
        errors.extend(_problems(result))
    steady_pending = len(result.pending_pods)
    rss_held = _rss_now()
    profiles = []
    if profile_dir is not None:
        profiles.append(_profile(profile_dir, "steady-loop", lambda: loop(steady)))

    pods = source.informers["pods"]
    added = [line for line in (directory / "added.jsonl").read_bytes().split(b"\n") if line]
    deleted = [line for line in (directory / "deleted.jsonl").read_bytes().split(b"\n") if line]
    new_pod_loops = []
    scale_up_nodes = 0
    apply_seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for line in added:
            pods._apply(decode_json(line))
        apply_seconds.append(time.perf_counter() - start)
        seconds, result = loop(steady)
        new_pod_loops.append(seconds)
        scale_up_nodes = sum(d.delta for d in result.scale_up.decisions)
        errors.extend(_problems(result))
        for line in deleted:
            pods._apply(decode_json(line))
    steady.wait_for_deletions(60)

    scale_down_ctx = context(scale_down_flags(nodes))
    scale_down_loops = []
    unneeded = removed = unremovable = 0
    for _ in range(repeat):
        a = autoscaler(scale_down_ctx)
        seconds, result = loop(a)
        scale_down_loops.append(seconds)
        unneeded = len(result.scale_down.unneeded)
        unremovable = len(result.scale_down.unremovable)
        errors.extend(_problems(result))
        removed = sum(1 for d in result.scale_down.deletions if d.ok)
        a.wait_for_deletions(120)
    if profile_dir is not None:
        profiles.append(
            _profile(profile_dir, "scale-down-loop", lambda: loop(autoscaler(scale_down_ctx)))
        )
    rss_after_loops = _rss_now()

    # (e) the relist of the pods, against reading and decoding the same pages.
    page_files = [directory / f"pods-{p}.json" for p in range(int(meta["podPages"]))]
    relists = []
    floors = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            for path in page_files:
                msgspec.json.decode(path.read_bytes())
            floors.append(time.perf_counter() - start)
        finally:
            gc.enable()
        gc.collect()
        start = time.perf_counter()
        pods.list_once()
        relists.append(time.perf_counter() - start)
    return {
        "nodes": nodes,
        "pods": len(pods.items()),
        "syncSeconds": sync_seconds,
        "firstLoop": first,
        "steadyLoops": steady_loops,
        "steadyPending": steady_pending,
        "applyEvents": apply_seconds,
        "newPodLoops": new_pod_loops,
        "scaleUpNodes": scale_up_nodes,
        "scaleDownLoops": scale_down_loops,
        "unneeded": unneeded,
        "unremovable": unremovable,
        "errors": sorted(set(errors))[:10],
        "removed": removed,
        "relists": relists,
        "relistFloors": floors,
        "baseRss": base_rss,
        "rssHeld": rss_held,
        "rssAfterLoops": rss_after_loops,
        "peakRss": _peak_rss(),
        "parseErrors": sum(i.parse_errors for i in source.informers.values()),
        "profiles": profiles,
        "maxIteration": max(iterations),
        "gcCollections": [g["collections"] for g in gc.get_stats()],
    }


# --------------------------------------------------------------------------- the parent


@dataclass
class SteadyResult:
    """The figures of the `steady-5k` row and their verdicts."""

    scale: float
    meta: dict[str, Any] = field(default_factory=dict)
    doc: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    traceback: str = ""

    @property
    def ok(self) -> bool:
        """The run worked and behaved as expected (targets aside, as for the other rows)."""
        d = self.doc
        return (
            not self.error
            and d.get("parseErrors") == 0
            and d.get("pods") == self.meta.get("pods")
            and d.get("steadyPending") == 0
            and d.get("scaleUpNodes", 0) > 0
            and d.get("unneeded", 0) > 0
            and not d.get("errors")
        )

    def verdicts(self) -> list[tuple[str, str, bool]]:
        """(figure, measured, met) per target."""
        d = self.doc
        med = statistics.median
        relist = med(d["relists"]) / med(d["relistFloors"])
        return [
            (
                f"(a) loop, nothing changed (<= {TARGET_STEADY_S:g} s each)",
                "max " + f"{max(d['steadyLoops']):.3f} s of {len(d['steadyLoops'])} "
                f"(median {med(d['steadyLoops']):.3f} s; first loop {d['firstLoop']:.3f} s; "
                f"longest iteration of any loop, with report and collector, {d['maxIteration']:.3f} s)",
                max(d["steadyLoops"]) <= TARGET_STEADY_S,
            ),
            (
                f"(b) loop after {self.meta.get('newPods', 0):,} new pending pods "
                f"(<= {TARGET_NEW_PODS_S:g} s)",
                f"median {med(d['newPodLoops']):.3f} s, max {max(d['newPodLoops']):.3f} s; "
                f"+{d['scaleUpNodes']} nodes planned (dry-run)",
                med(d["newPodLoops"]) <= TARGET_NEW_PODS_S,
            ),
            (
                f"(c) scale-down evaluation of all {d['nodes']:,} nodes "
                f"(<= {TARGET_SCALE_DOWN_S:g} s)",
                f"median {med(d['scaleDownLoops']):.3f} s, max {max(d['scaleDownLoops']):.3f} s; "
                f"{d['unneeded']} unneeded, {d['unremovable']} unremovable, "
                f"{d['removed']} to remove (dry-run)",
                med(d["scaleDownLoops"]) <= TARGET_SCALE_DOWN_S,
            ),
            (
                "(d) RSS holding the cluster (<= 1 GiB)",
                f"{d['rssAfterLoops'] / 2**20:,.0f} MiB after the loops "
                f"({d['rssHeld'] / 2**20:,.0f} MiB after the steady loops, "
                f"{d['baseRss'] / 2**20:,.0f} MiB before the first list, "
                f"peak {d['peakRss'] / 2**20:,.0f} MiB with the relists)",
                d["rssAfterLoops"] <= TARGET_RSS,
            ),
            (
                f"(e) relist of {d['pods']:,} pods (<= {TARGET_RELIST_RATIO:g}x floor)",
                f"median {med(d['relists']):.3f} s over floor {med(d['relistFloors']):.3f} s: "
                f"x{relist:.2f}",
                relist <= TARGET_RELIST_RATIO,
            ),
        ]

    def lines(self) -> list[str]:
        note = "" if self.scale == 1.0 else f" (scale {self.scale:g}; the target is for scale 1)"
        if self.error:
            return [f"{NAME}: {self.error}"]
        d = self.doc
        head = (
            f"{NAME}: {d['nodes']:,} nodes, {d['pods']:,} real-shaped pods "
            f"({self.meta.get('podBytes', 0) / 2**20:,.0f} MiB of pod pages), "
            f"caches synced in {d['syncSeconds']:.2f} s"
            + ("" if self.ok else " -- UNEXPECTED: " + json.dumps({k: d.get(k) for k in ("parseErrors", "steadyPending", "scaleUpNodes", "unneeded", "errors")}))
        )
        profiles = [f"  profile: {p}" for p in d.get("profiles", ())]
        return [head] + [
            f"  {what}: {measured}: {'MET' if met else 'NOT MET'}{note}"
            for what, measured, met in self.verdicts()
        ] + profiles

    def to_json(self) -> dict[str, Any]:
        return {
            "name": NAME,
            "scale": self.scale,
            "generated": self.meta,
            "figures": self.doc,
            "ok": self.ok,
            "error": self.error,
            "traceback": self.traceback,
            "targets": [] if self.error else [
                {"figure": w, "measured": m, "met": ok} for w, m, ok in self.verdicts()
            ],
        }


def measure(
    *,
    scale: float,
    seed: int,
    repeat: int,
    data_dir: Path,
    timeout: float,
    profile_dir: Path | None = None,
) -> SteadyResult:
    result = SteadyResult(scale=scale)
    directory = data_dir / f"{NAME}-x{scale:g}-seed{seed}"
    result.meta = generate(directory, scale, seed)
    outcome = run_worker("bench.steady", directory, repeat, profile_dir, timeout)
    if outcome.doc is None:
        result.error, result.traceback = outcome.error, outcome.traceback
        return result
    result.doc = outcome.doc
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.steady", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "clusterscaler-bench")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="Write pyinstrument profiles of one more steady loop and scale-down loop to DIR.",
    )
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        sys.stdout.write(json.dumps(worker(args.worker, args.repeat, args.profile)) + "\n")
        return 0
    result = measure(
        scale=args.scale,
        seed=args.seed,
        repeat=args.repeat,
        data_dir=args.data_dir,
        timeout=args.timeout,
        profile_dir=args.profile,
    )
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print("\n".join(result.lines()))
        if result.traceback:
            print(result.traceback)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Our scheduling simulation against kube-scheduler, over generated workloads
(`clusterscaler.testing.differential`, `clusterscaler.testing.workloads`).

The seeded set runs in the normal suite: one derandomized batch of 30 workloads side by side
on the real control plane. The slow run (`pytest -m differential`, docs/testing.md) draws
random batches, 510 workloads by default, and writes its tally to
`CLUSTERSCALER_DIFFERENTIAL_REPORT` when set. A disagreement fails the test with every
disagreeing workload; Hypothesis then shrinks the batch to a minimal case.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from clusterscaler.testing.differential import (
    HELPED_LATER,
    OVERTAKEN,
    Tally,
    WorkloadOutcome,
    clear_batch,
    run_batch,
    write_report,
)
from clusterscaler.testing.kwokenv import KwokEnv
from clusterscaler.testing.workloads import (
    DEDICATED_TAINT,
    FEATURES,
    HOSTNAME_LABEL,
    TIER_LABEL,
    ZONE_LABEL,
    Claim,
    ExistingNode,
    Group,
    LocalVolume,
    PodSpec,
    PodTerm,
    Shape,
    Spread,
    Workload,
    workload_batches,
)
from hypothesis import HealthCheck, Phase, assume, given, settings

pytestmark = pytest.mark.realcluster

SEEDED_BATCH = 30
SLOW_BATCH = 30
SLOW_BATCHES = int(os.environ.get("CLUSTERSCALER_DIFFERENTIAL_BATCHES", "17"))
# Record every batch (and the harness's own failures) and fail once at the end, rather than
# stop and shrink at the first disagreeing batch (shrinking a batch of 30 on a real cluster
# takes hours; a disagreeing workload is cut down alone).
KEEP_GOING = bool(os.environ.get("CLUSTERSCALER_DIFFERENTIAL_KEEP_GOING"))

_SLOW_TALLY = Tally()
_SLOW_OUTCOMES: list[WorkloadOutcome] = []
_SLOW_ERRORS: list[str] = []

_SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
               HealthCheck.filter_too_much, HealthCheck.data_too_large]


def _run(env: KwokEnv, batch: list[Workload],
         timings: dict[str, float] | None = None) -> list[WorkloadOutcome]:
    outcomes: list[WorkloadOutcome] = []
    earlier = set(env.cluster.namespaces)
    try:
        outcomes = run_batch(env.cluster, env, batch, timings=timings)
    finally:
        env.stop_all()
        env.runs.clear()
        clear_batch(env.cluster, [ns for ns in env.cluster.namespaces
                                  if ns.startswith("diff-") and ns not in earlier])
    return outcomes


def _failure(outcomes: list[WorkloadOutcome]) -> str:
    bad = [o for o in outcomes if not o.agreed]
    return f"{len(bad)} of {len(outcomes)} workloads disagree with kube-scheduler:\n" + "\n".join(
        o.report() for o in bad
    )


# No explain phase: it re-runs a failing example under a tracer, far too slow on a cluster.
_PHASES = [Phase.generate, Phase.shrink]


@pytest.mark.timeout(900)
@settings(max_examples=1, derandomize=True, database=None, deadline=None,
          phases=_PHASES, suppress_health_check=_SUPPRESSED)
@given(batch=workload_batches(SEEDED_BATCH))
def test_seeded_workloads_agree_with_kube_scheduler(kwok_env: KwokEnv, batch: list[Workload]) -> None:
    """30 workloads (the first derandomized batch of distinct ones): every claim of our
    simulation holds on the real scheduler, and the batch exercises most generator options."""
    # The first example Hypothesis draws is its simplest: 30 copies of one workload.
    assume(len(set(batch)) == len(batch))
    outcomes = _run(kwok_env, batch)
    assert len(outcomes) == SEEDED_BATCH
    assert all(o.agreed for o in outcomes), _failure(outcomes)
    claimed = [p for o in outcomes for p in o.pods]
    # The comparison is not vacuous: pods a new node helps, and pods no group helps.
    assert {p.claim for p in claimed} >= {"helps", "no-group"}, [p.claim for p in claimed]
    covered = set().union(*(w.features for w in batch))
    assert len(covered) >= len(FEATURES) - 4, sorted(set(FEATURES) - covered)


@pytest.mark.differential
@pytest.mark.timeout(0)
@settings(max_examples=SLOW_BATCHES, derandomize=False, database=None, deadline=None,
          print_blob=True, phases=[Phase.generate] if KEEP_GOING else _PHASES,
          suppress_health_check=_SUPPRESSED)
@given(batch=workload_batches(SLOW_BATCH))
def test_generated_workloads_agree_with_kube_scheduler(
    kwok_env: KwokEnv, batch: list[Workload], request: pytest.FixtureRequest
) -> None:
    if "differential" not in (request.config.getoption("-m") or ""):
        pytest.skip("the slow differential run: pytest -m differential (docs/testing.md)")
    # Hypothesis's first draws are its simplest: copies of one workload.
    assume(len(set(batch)) == len(batch))
    started = time.monotonic()
    timings: dict[str, float] = {}
    try:
        outcomes = _run(kwok_env, batch, timings)
    except Exception as error:
        if not KEEP_GOING:
            raise
        # The harness's own failure (a bound exceeded, a process that exited): no verdict on
        # the batch; recorded with the batch, and the run goes on.
        _SLOW_ERRORS.append(f"{type(error).__name__}: {error}\nbatch: {batch!r}")
        print(f"batch failed in the harness: {type(error).__name__}: {str(error)[:2000]}",
              flush=True)
        return
    elapsed = time.monotonic() - started
    for outcome in outcomes:
        _SLOW_TALLY.add(outcome)
    _SLOW_OUTCOMES.extend(outcomes)
    _SLOW_TALLY.seconds += elapsed
    report = os.environ.get("CLUSTERSCALER_DIFFERENTIAL_REPORT")
    if report:
        write_report(Path(report), _SLOW_TALLY, _SLOW_OUTCOMES, _SLOW_ERRORS)
    steps = ", ".join(f"{k} {v:.0f}s" for k, v in timings.items())
    print(f"batch of {len(outcomes)}: {sum(o.agreed for o in outcomes)} agree, {elapsed:.0f}s "
          f"({steps}), load {os.getloadavg()[0]:.1f}", flush=True)
    print(_SLOW_TALLY.table(), flush=True)
    if not KEEP_GOING:
        assert all(o.agreed for o in outcomes), _failure(outcomes)


@pytest.mark.differential
def test_the_slow_run_found_no_disagreement(request: pytest.FixtureRequest) -> None:
    """With `CLUSTERSCALER_DIFFERENTIAL_KEEP_GOING`, the slow run records every batch and
    fails here, once, with every disagreeing workload (each to be cut down by hand)."""
    if "differential" not in (request.config.getoption("-m") or ""):
        pytest.skip("the slow differential run: pytest -m differential (docs/testing.md)")
    print(_SLOW_TALLY.table(), flush=True)
    assert not _SLOW_ERRORS, "\n\n".join(_SLOW_ERRORS)
    assert all(o.agreed for o in _SLOW_OUTCOMES), _failure(_SLOW_OUTCOMES)


# Found by the slow run, cut down by hand to the pods that matter: two small high-priority
# pods of app b, and a bigger low-priority one that spreads app b over zones (maxSkew 2,
# minDomains 3) and selects the one group, in one zone. Our estimator, as CA's, places the
# bigger pod first on the new node; kube-scheduler binds the high-priority pods first, and
# then the zone holds 2 pods of app b, with fewer domains than minDomains: 2 + 1 - 0 > 2.
SPREAD_OVERTAKEN_BY_PRIORITY = Workload(
    groups=(Group("g0", Shape(cpu=4000, memory=4096, pods=110,
                              labels=((TIER_LABEL, "a"),), zone="z1"), max_count=5),),
    existing=(),
    pending=(
        PodSpec("pod-0", "b", 100, 128, priority_class="diff-high"),
        PodSpec("pod-1", "b", 1000, 128, node_selector=((TIER_LABEL, "a"),),
                spread=(Spread(ZONE_LABEL, 2, "DoNotSchedule", "b", min_domains=3),),
                priority_class="diff-low"),
        PodSpec("pod-2", "b", 500, 512, priority_class="diff-high"),
    ),
    features=frozenset({"spread-zone", "spread-min-domains", "priorities"}),
)


def test_a_claim_overtaken_by_kube_schedulers_priority_order_is_told_apart(
    kwok_env: KwokEnv,
) -> None:
    """The spread pod stays pending, and our predicates agree it fits nowhere once
    kube-scheduler has bound the others (docs/testing.md, deliberate differences)."""
    (outcome,) = _run(kwok_env, [SPREAD_OVERTAKEN_BY_PRIORITY])
    assert outcome.agreed, outcome.report()
    claims = {p.pod.split("/")[1]: p.claim for p in outcome.pods}
    assert claims["pod-0"] == claims["pod-2"] == "helps", claims
    assert claims["pod-1"] in ("helps", OVERTAKEN), claims


# Found by the slow run (its w9, less a pod no group could hold): pod-1 (app a) fits every
# group; pod-2 is kept by anti-affinity out of the zone of any app-a pod. Each group's
# option plans both pods on that group's template nodes, all in one zone, so the first loop
# finds no group for pod-2; once pod-1's node is upcoming in another group's zone, a later
# loop scales up for pod-2, and kube-scheduler binds it there.
ANTI_AFFINITY_HELPED_LATER = Workload(
    groups=(
        Group("g0", Shape(cpu=4000, memory=2048, pods=2, widgets=2,
                          labels=((TIER_LABEL, "b"),), zone="z3"), max_count=4),
        Group("g1", Shape(cpu=8000, memory=4096, pods=5, labels=((TIER_LABEL, "a"),),
                          zone="z2"), max_count=4),
    ),
    existing=(),
    pending=(
        PodSpec("pod-1", "a", 1500, 1024, affinity=(PodTerm("a", ZONE_LABEL),),
                spread=(Spread(HOSTNAME_LABEL, 2, "DoNotSchedule", "c", min_domains=3,
                               node_affinity_policy="Ignore", node_taints_policy="Honor"),),
                tolerations=((DEDICATED_TAINT, "Equal", "gpu", "NoExecute"),),
                host_port=8081, priority_class="diff-high"),
        PodSpec("pod-2", "b", 1500, 1024, anti_affinity=(PodTerm("a", ZONE_LABEL),),
                spread=(Spread(ZONE_LABEL, 2, "DoNotSchedule", "c"),), host_port=8080),
    ),
    features=frozenset({"pod-anti-affinity-zone", "pod-affinity-zone", "several-groups"}),
)


def test_a_pod_a_later_loop_helps_is_told_apart(kwok_env: KwokEnv) -> None:
    (outcome,) = _run(kwok_env, [ANTI_AFFINITY_HELPED_LATER])
    assert outcome.agreed, outcome.report()
    claims = {p.pod.split("/")[1]: p for p in outcome.pods}
    assert claims["pod-1"].claim == "helps" and claims["pod-1"].node, claims
    assert claims["pod-2"].claim in ("helps", HELPED_LATER) and claims["pod-2"].node, claims


# Local volumes (kube-controller-manager binds the pre-bound claim; kube-scheduler's
# VolumeBinding picks the volume of the unbound one). Two groups, in zones z1 and z2; an
# existing node n0, full. pod-0's unbound claim has an available volume only in z2 (the one
# in z1 is too small); pod-1's claim is pre-bound to a volume pinned to n0, where it does
# not fit; pod-2's unbound claim is too big for any volume but one pinned to n0.
VOLUMES = Workload(
    groups=(Group("g0", Shape(cpu=4000, memory=8192, pods=110, zone="z1"), max_count=3),
            Group("g1", Shape(cpu=4000, memory=8192, pods=110, zone="z2"), max_count=3)),
    existing=(ExistingNode("n0", Shape(cpu=1000, memory=2048, pods=110, zone="z1"),
                           (PodSpec("run-0-0", "c", 1000, 512),)),),
    pending=(
        PodSpec("pod-0", "a", 500, 512, claim="claim-0"),
        PodSpec("pod-1", "b", 500, 512, claim="claim-1"),
        PodSpec("pod-2", "b", 500, 512, claim="claim-2"),
    ),
    volumes=(LocalVolume("pv0", 1, zone="z1"), LocalVolume("pv1", 2, zone="z2"),
             LocalVolume("pv2", 5, node="n0"), LocalVolume("pv3", 5, node="n0")),
    claims=(Claim("claim-0", 2), Claim("claim-1", 1, volume="pv2"), Claim("claim-2", 5)),
    features=frozenset({"pvc-pre-bound", "pvc-wait-for-first-consumer", "pv-pinned-to-node",
                        "pv-pinned-to-zone", "existing-nodes", "several-groups"}),
)


def test_only_the_groups_where_a_pods_volume_can_be_help_it(kwok_env: KwokEnv) -> None:
    """A new node helps a pod whose claim can bind only in its zone (and no node of another
    zone), and no new node helps a pod whose volume is pinned to an existing node."""
    (outcome,) = _run(kwok_env, [VOLUMES])
    assert outcome.agreed, outcome.report()
    claims = {p.pod.split("/")[1]: p for p in outcome.pods}
    assert claims["pod-0"].claim == "helps" and claims["pod-0"].node, claims
    assert [g.rsplit("-", 1)[1] for g in claims["pod-0"].groups] == ["g1"], claims
    assert claims["pod-1"].claim == claims["pod-2"].claim == "no-group", claims
    assert not claims["pod-1"].node and not claims["pod-2"].node, claims

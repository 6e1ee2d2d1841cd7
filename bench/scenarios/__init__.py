"""The benchmark scenarios: deterministic, seeded generators of cluster snapshots.

Each generator returns a `Scenario`: a Kubernetes `List` snapshot, a `sim` cloud-config, the
flags `clusterscaler simulate --once` runs with, and the decision the loop must take.
`ROWS` lists the rows of the benchmark table (issue 9's scenarios (1)-(4) and the pod
scaling rows of (1) and (3); issue 21's rows of real-shaped pods; the DRA pair); `generate(name, scale, seed)` builds one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.scenarios import claims, mixed, real, scalability, upstream
from bench.scenarios.model import Decision, Expected, Scenario, check

__all__ = [
    "DEFAULT_SEED",
    "ROWS",
    "Decision",
    "Expected",
    "Row",
    "Scenario",
    "check",
    "generate",
]

DEFAULT_SEED = 9


@dataclass(frozen=True)
class Row:
    """One row of the benchmark table: how to build its scenario at a given scale."""

    name: str
    build: Callable[[float, int], Scenario]
    # Scaling rows show how cost grows with pods; the main rows are the targets.
    scaling: bool = False


def _n(value: float, multiple: int = 1) -> int:
    """`value` rounded to a positive multiple of `multiple`."""
    return max(multiple, round(value / multiple) * multiple)


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("scale-up-50k", lambda s, seed: upstream.scale_up(_n(50_000 * s, 50))),
        Row("scale-down-2k", lambda s, seed: upstream.scale_down(_n(2_000 * s, 5))),
        Row(
            "scale-down-2k-pool",
            lambda s, seed: upstream.scale_down(_n(2_000 * s, 5), whole_pool=True),
        ),
        Row("burst-30k", lambda s, seed: scalability.burst(_n(1_000 * s))),
        Row("empty-300", lambda s, seed: scalability.empty_nodes(_n(1_000 * s), _n(300 * s))),
        Row("mixed-5k", lambda s, seed: mixed.mixed(_n(5_000 * s), seed)),
        Row("mixed-20k", lambda s, seed: mixed.mixed(_n(20_000 * s), seed)),
        Row("scale-up-10k", lambda s, seed: upstream.scale_up(_n(10_000 * s, 50)), scaling=True),
        Row("scale-up-100k", lambda s, seed: upstream.scale_up(_n(100_000 * s, 50)), scaling=True),
        Row("scale-up-150k", lambda s, seed: upstream.scale_up(_n(150_000 * s, 50)), scaling=True),
        Row("burst-pods-10k", lambda s, seed: scalability.burst(_n(10_000 * s / 60)), scaling=True),
        Row("burst-pods-50k", lambda s, seed: scalability.burst(_n(50_000 * s / 60)), scaling=True),
        Row("burst-pods-100k", lambda s, seed: scalability.burst(_n(100_000 * s / 60)), scaling=True),
        # Issue 21: real-shaped pods (bench.scenarios.realpods).
        Row("real-scale-up-10k", lambda s, seed: real.scale_up(_n(10_000 * s), seed)),
        Row("real-scale-up-50k", lambda s, seed: real.scale_up(_n(50_000 * s), seed)),
        Row("real-scale-up-150k", lambda s, seed: real.scale_up(_n(150_000 * s), seed)),
        Row("scale-down-2k-real", lambda s, seed: real.scale_down(_n(2_000 * s), seed)),
        # Pods that claim devices (DRA) and the same pods without claims: a pair, whose
        # loops are compared with each other (`bench.run.PAIRS`).
        Row("dra-claims-10k", lambda s, seed: claims.scale_up(_n(10_000 * s, 80), claims=True)),
        Row("dra-plain-10k", lambda s, seed: claims.scale_up(_n(10_000 * s, 80), claims=False)),
    )
}


def generate(name: str, scale: float = 1.0, seed: int = DEFAULT_SEED) -> Scenario:
    """Build the scenario of row `name` at `scale` (1.0: the sizes of the issue)."""
    row = ROWS.get(name)
    if row is None:
        raise KeyError(f"scenario {name!r}: expected one of {', '.join(ROWS)}")
    if not scale > 0:
        raise ValueError(f"scale: expected a positive number, got {scale!r}")
    scenario = row.build(scale, seed)
    return scenario.renamed(name)

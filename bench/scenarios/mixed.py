"""Scenario (4): a Karpenter-style mixed workload.

Pending Deployment replicas (ReplicaSet-owned pods) with requests from 100m to 1,500m cpu
and 100Mi to 4Gi memory, mixing plain pods, zone topology spread, hostname topology
spread, zone self-affinity and hostname anti-affinity, over 20 node groups of seven shapes
in three zones. Every pod fits the smallest shape, so the loop must find room for all of
them; which group it picks is the expander's business, so only that is checked.
"""

from __future__ import annotations

import random
from typing import Any

from bench.scenarios.common import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    node_group,
    node_template,
    owner_ref,
    pod,
    replica_set,
    snapshot,
)
from bench.scenarios.model import Expected, Scenario

ZONES = ("zone-a", "zone-b", "zone-c")
# (family, cpu, memory GiB, price per cpu-hour)
SHAPES = (
    ("m", 2, 8, 0.048),
    ("m", 4, 16, 0.048),
    ("m", 8, 32, 0.048),
    ("m", 16, 64, 0.048),
    ("c", 4, 8, 0.0425),
    ("c", 8, 16, 0.0425),
    ("c", 16, 32, 0.0425),
)
GROUPS = 20
MAX_GROUP_SIZE = 2_000
CPU_CHOICES = tuple(f"{m}m" for m in range(100, 1501, 100))
MEMORY_CHOICES = ("100Mi", "256Mi", "512Mi", "1Gi", "1536Mi", "2Gi", "3Gi", "4Gi")
# (kind, weight, smallest and largest replica count)
KINDS = (
    ("plain", 40, 20, 200),
    ("zone-spread", 20, 20, 150),
    ("hostname-spread", 15, 10, 100),
    ("zone-affinity", 15, 10, 100),
    ("hostname-anti-affinity", 10, 5, 40),
)


def _groups() -> list[dict[str, Any]]:
    out = []
    for i in range(GROUPS):
        family, cpu, mem, price = SHAPES[i % len(SHAPES)]
        zone = ZONES[i // len(SHAPES)]
        name = f"{family}-{cpu}x{mem}-{zone}"
        labels = {
            ZONE_LABEL: zone,
            "node.kubernetes.io/instance-type": f"{family}.{cpu}x{mem}",
        }
        template = node_template(labels, str(cpu), f"{mem}Gi", 110)
        out.append(node_group(name, template, max_size=MAX_GROUP_SIZE, price=round(cpu * price, 4)))
    return out


def _constraints(kind: str, app: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The affinity and topology spread constraints of a workload of `kind`."""
    selector = {"matchLabels": {"app": app}}
    if kind == "zone-spread":
        return None, [_spread(ZONE_LABEL, selector)]
    if kind == "hostname-spread":
        return None, [_spread(HOSTNAME_LABEL, selector)]
    if kind == "zone-affinity":
        term = {"labelSelector": selector, "topologyKey": ZONE_LABEL}
        return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}, []
    if kind == "hostname-anti-affinity":
        term = {"labelSelector": selector, "topologyKey": HOSTNAME_LABEL}
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}, []
    return None, []


def _spread(key: str, selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector,
    }


def mixed(pods: int, seed: int) -> Scenario:
    """`pods` pending pods of randomly drawn workloads (seeded: the same seed, the same pods)."""
    if pods <= 0:
        raise ValueError(f"mixed: pods: expected a positive number, got {pods}")
    rng = random.Random(seed)
    kinds = [k[0] for k in KINDS]
    weights = [k[1] for k in KINDS]
    sizes = {k[0]: (k[2], k[3]) for k in KINDS}
    items: list[dict[str, Any]] = []
    workloads: list[dict[str, Any]] = []
    made = 0
    w = 0
    while made < pods:
        kind = rng.choices(kinds, weights)[0]
        low, high = sizes[kind]
        replicas = min(rng.randint(low, high), pods - made)
        app = f"{kind}-{w}"
        cpu = rng.choice(CPU_CHOICES)
        memory = rng.choice(MEMORY_CHOICES)
        affinity, spread = _constraints(kind, app)
        owner = owner_ref("ReplicaSet", app)
        labels = {"app": app, "kind": kind}
        workloads.append(replica_set(app, replicas, labels))
        items.extend(
            pod(
                f"{app}-{r}",
                cpu,
                memory,
                labels=labels,
                owner=owner,
                affinity=affinity,
                spread=spread,
            )
            for r in range(replicas)
        )
        made += replicas
        w += 1
    return Scenario(
        name=f"mixed-{pods}",
        title=f"(4) mixed: {pods:,} pending pods of {w} workloads, {GROUPS} groups in 3 zones",
        nodes=0,
        pods=pods,
        snapshot=snapshot([*workloads, *items]),
        cloud_config={"nodeGroups": _groups()},
        flags=(
            "--expander=least-waste",
            "--max-nodes-per-scaleup=1000",
            "--max-nodes-total=20000",
        ),
        expected=Expected(min_scale_up_nodes=1, all_pods_fit=True),
    )

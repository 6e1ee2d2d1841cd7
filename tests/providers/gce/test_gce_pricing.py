"""The GCE price model: machine prices, family rates for unlisted and custom types,
preemptible and spot, GPUs, pods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clusterscaler.api import Node, Resources
from clusterscaler.simulator.builders import make_pod
from clusterscaler_gce.pricing import GcePriceModel, hours

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = T0 + timedelta(hours=1)
GIB = 1024**3


def node(machine_type: str, cpu: int = 4, memory_gib: int = 16, gpus: int = 0, **labels: str) -> Node:
    extended = {"nvidia.com/gpu": gpus} if gpus else {}
    all_labels = {"node.kubernetes.io/instance-type": machine_type, **{k.replace("_", "/"): v for k, v in labels.items()}}
    return Node(name="n", labels=all_labels, capacity=Resources(cpu=cpu * 1000, memory=memory_gib * GIB, pods=110, extended=extended))


MODEL = GcePriceModel()


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (node("n1-standard-4"), 0.19),
        (node("e2-medium", 2, 4), 0.03351),
        (node("n1-standard-4", **{"cloud.google.com_gke-preemptible": "true"}), 0.04),
        (node("n1-standard-4", **{"cloud.google.com_gke-spot": "true"}), 0.04),
        # Not in the table: the family's rates.
        (node("n2-standard-6", 6, 24), 6 * 0.031611 + 24 * 0.004237),
        (node("n2-custom-6-24576", 6, 24), 6 * 0.033174 + 24 * 0.004446),
        (node("n2-custom-6-24576", 6, 24, **{"cloud.google.com_gke-spot": "true"}),
         (6 * 0.033174 + 24 * 0.004446) * (0.00802 / 0.033174)),
        # An unknown family: the default rates.
        (node("zz9-standard-2", 2, 8), 2 * 0.033174 + 8 * 0.004446),
    ],
    ids=["listed", "e2-medium", "preemptible", "spot", "family-rates", "custom", "custom-spot", "default-rates"],
)
def test_node_price_per_hour(subject: Node, expected: float) -> None:
    assert MODEL.node_price(subject, T0, HOUR) == pytest.approx(expected, rel=1e-4)


def test_gpu_prices() -> None:
    labels = {"cloud.google.com_gke-accelerator": "nvidia-tesla-t4"}
    assert MODEL.node_price(node("n1-standard-4", gpus=2, **labels), T0, HOUR) == pytest.approx(0.19 + 2 * 0.35)
    spot = {**labels, "cloud.google.com_gke-spot": "true"}
    assert MODEL.node_price(node("n1-standard-4", gpus=2, **spot), T0, HOUR) == pytest.approx(0.04 + 2 * 0.11)
    assert MODEL.node_price(node("n1-standard-4", gpus=1), T0, HOUR) == pytest.approx(0.19 + 0.7)


def test_e2_small_types_cost_more_than_e2_medium() -> None:
    medium = MODEL.node_price(node("e2-medium", 2, 4), T0, HOUR)
    assert MODEL.node_price(node("e2-small", 2, 2), T0, HOUR) > medium
    assert MODEL.node_price(node("e2-micro", 2, 1), T0, HOUR) > medium


def test_time_counts_started_minutes() -> None:
    assert hours(T0, T0 + timedelta(seconds=61)) == pytest.approx(2 / 60)
    assert MODEL.node_price(node("n1-standard-4"), T0, T0 + timedelta(minutes=30)) == pytest.approx(0.095)


def test_pod_price_is_its_requests_at_default_rates() -> None:
    pod = make_pod("p", "2", "4Gi")
    assert MODEL.pod_price(pod, T0, HOUR) == pytest.approx(2 * 0.033174 + 4 * 0.004446)


def test_price_expander_prefers_the_cheaper_mig() -> None:
    # The comparison the price expander makes: same capacity, spot is cheaper.
    on_demand = MODEL.node_price(node("n2-standard-8", 8, 32), T0, HOUR)
    spot = MODEL.node_price(node("n2-standard-8", 8, 32, **{"cloud.google.com_gke-spot": "true"}), T0, HOUR)
    assert spot < on_demand

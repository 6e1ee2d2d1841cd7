"""The GCE price model for `--expander=price`, as Cluster Autoscaler's GcePriceModel.

A node costs its machine type's hourly price (the preemptible one when it carries
`cloud.google.com/gke-preemptible=true` or `cloud.google.com/gke-spot=true`), or, for types
not in the table and custom types, its vCPUs and memory at its family's rates (times the
family's preemptible discount); plus its GPUs at the price of the type named by
`cloud.google.com/gke-accelerator`. A pod costs its requests at the default rates, as on a
perfectly fitting machine. Time is counted in started minutes. Prices are USD and live in
`prices.json`, beside this module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from clusterscaler.api import GPU_RESOURCE, Node, Pod

from clusterscaler_gce.machine_types import family, is_custom
from clusterscaler_gce.template import GPU_LABEL

PREEMPTIBLE_LABEL = "cloud.google.com/gke-preemptible"
SPOT_LABEL = "cloud.google.com/gke-spot"
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Rates:
    cpu: float
    memory_gb: float
    preemptible_discount: float


@dataclass(frozen=True, slots=True)
class PriceTable:
    default: Rates
    gpu_default: float
    predefined: dict[str, Rates]
    custom: dict[str, Rates]
    instances: dict[str, float]
    preemptible_instances: dict[str, float]
    gpus: dict[str, float]
    preemptible_gpus: dict[str, float]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PriceTable:
        def rates(raw: dict[str, Any]) -> Rates:
            return Rates(float(raw["cpu"]), float(raw["memory_gb"]), float(raw["preemptible_discount"]))

        return cls(
            default=rates(data["default"]),
            gpu_default=float(data["default"]["gpu"]),
            predefined={k: rates(v) for k, v in data["predefined"].items()},
            custom={k: rates(v) for k, v in data["custom"].items()},
            instances={k: float(v) for k, v in data["instances"].items()},
            preemptible_instances={k: float(v) for k, v in data["preemptible_instances"].items()},
            gpus={k: float(v) for k, v in data["gpus"].items()},
            preemptible_gpus={k: float(v) for k, v in data["preemptible_gpus"].items()},
        )


def load_price_table() -> PriceTable:
    text = Path(__file__).with_name("prices.json").read_text(encoding="utf-8")
    return PriceTable.from_json(json.loads(text))


def hours(start: datetime, end: datetime) -> float:
    """Started minutes, in hours."""
    return math.ceil((end - start).total_seconds() / 60.0) / 60.0


def instance_type(node: Node) -> str:
    for label in INSTANCE_TYPE_LABELS:
        if label in node.labels:
            return node.labels[label]
    return ""


def is_preemptible(node: Node) -> bool:
    return node.labels.get(PREEMPTIBLE_LABEL) == "true" or node.labels.get(SPOT_LABEL) == "true"


class GcePriceModel:
    """`PricingModel` for GCE nodes and pods."""

    def __init__(self, table: PriceTable | None = None) -> None:
        self.table = table or load_price_table()

    def _rates(self, machine_type: str) -> Rates:
        table = self.table.custom if is_custom(machine_type) else self.table.predefined
        return table.get(family(machine_type), self.table.default) if machine_type else self.table.default

    def node_price(self, node: Node, start: datetime, end: datetime) -> float:
        duration = hours(start, end)
        machine_type = instance_type(node)
        preemptible = is_preemptible(node)
        prices = self.table.preemptible_instances if preemptible else self.table.instances
        price = 0.0
        if machine_type in prices:
            price = prices[machine_type] * duration
        elif machine_type:
            rates = self._rates(machine_type)
            price = (
                node.capacity.cpu / 1000.0 * rates.cpu
                + node.capacity.memory / GIB * rates.memory_gb
            ) * duration
            if preemptible:
                price *= rates.preemptible_discount
        gpus = node.capacity.extended.get(GPU_RESOURCE, 0)
        if gpus:
            gpu_prices = self.table.preemptible_gpus if preemptible else self.table.gpus
            per_gpu = gpu_prices.get(node.labels.get(GPU_LABEL, ""), self.table.gpu_default)
            price += gpus * per_gpu * duration
        return price

    def pod_price(self, pod: Pod, start: datetime, end: datetime) -> float:
        duration = hours(start, end)
        requests = pod.requests
        rates = self.table.default
        price = (requests.cpu / 1000.0 * rates.cpu + requests.memory / GIB * rates.memory_gb) * duration
        price += requests.extended.get(GPU_RESOURCE, 0) * self.table.gpu_default * duration
        return price

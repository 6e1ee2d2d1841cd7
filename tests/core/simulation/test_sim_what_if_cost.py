"""The what-if's cost before and after, for node groups whose price is known (`price` in
the `sim` cloud-config); without one, no cost is shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = str(ROOT / "examples" / "snapshots" / "eks-cluster.json")
CLOUD_CONFIG = str(ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml")
GENERAL, MEMORY = 0.192, 0.252


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def what_if(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)["whatIf"]
    return doc


def group_of_nodes() -> dict[str, str]:
    items = json.loads(Path(SNAPSHOT).read_text(encoding="utf-8"))["items"]
    return {
        i["metadata"]["name"]: i["metadata"]["labels"]["eks.amazonaws.com/nodegroup"]
        for i in items
        if i["kind"] == "Node"
    }


def nodes_per_group() -> dict[str, int]:
    counts: dict[str, int] = {}
    for group in group_of_nodes().values():
        counts[group] = counts.get(group, 0) + 1
    return counts


def test_removing_a_group_lowers_the_cost(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = nodes_per_group()
    doc = what_if(
        capsys, "simulate", "--snapshot", SNAPSHOT, "--cloud-config", CLOUD_CONFIG, "--once",
        "--remove-node-group", "memory",
    )  # fmt: skip
    # Before: the groups' nodes and the memory node the loop adds.
    expected = nodes["general"] * GENERAL + (nodes.get("memory", 0) + 1) * MEMORY
    assert doc["before"]["costPerHour"] == pytest.approx(expected, abs=1e-4)
    assert doc["after"]["costPerHour"] == pytest.approx(nodes["general"] * GENERAL, abs=1e-4)


def test_a_removed_node_is_no_longer_paid_for(capsys: pytest.CaptureFixture[str]) -> None:
    doc = what_if(
        capsys, "explain", "--snapshot", SNAPSHOT, "--cloud-config", CLOUD_CONFIG,
        "--scale-down-unneeded-time=0s", "--drain-node", "ip-10-0-1-11.ec2.internal",
    )  # fmt: skip
    after = doc["after"]
    assert "ip-10-0-1-11.ec2.internal" in after["nodesRemoved"]
    price = {"general": GENERAL, "memory": MEMORY}
    group_of = group_of_nodes()
    kept = (
        sum(price[g] for g in group_of.values())
        - sum(price[group_of[n]] for n in after["nodesRemoved"])
        + sum(price[g] * n for g, n in after["nodesAdded"].items())
    )
    assert after["costPerHour"] == pytest.approx(kept, abs=1e-4)


def test_the_table_shows_the_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "simulate", "--snapshot", SNAPSHOT, "--cloud-config", CLOUD_CONFIG, "--once",
        "--remove-node-group", "memory",
    )  # fmt: skip
    assert code == 0, err
    [row] = [line for line in out.splitlines() if line.startswith("cost per hour")]
    before, after = row.split()[-2:]
    assert float(before) > float(after) > 0


def test_no_price_no_cost(capsys: pytest.CaptureFixture[str]) -> None:
    eks = str(ROOT / "examples" / "snapshots" / "eks.json")
    doc = what_if(
        capsys,
        "simulate",
        "--snapshot",
        eks,
        "--once",
        "--drain-node",
        "ip-192-168-20-93.ec2.internal",
    )
    assert "costPerHour" not in doc["before"] and "costPerHour" not in doc["after"]


def test_prices_of_inferred_groups_from_the_bounds_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bounds = tmp_path / "bounds.yaml"
    bounds.write_text(
        "nodeGroups:\n  ng-general: {maxSize: 5, price: 0.192}\n  ng-spot: {price: 0.14}\n"
    )
    eks = str(ROOT / "examples" / "snapshots" / "eks.json")
    code, out, err = run(
        capsys, "simulate", "--snapshot", eks, "--once", "--json", "--node-group-bounds", str(bounds),
        "--nodes", "1:4:ng-general", "--drain-node", "ip-192-168-20-93.ec2.internal",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    groups = {g["name"]: g for g in doc["inferredNodeGroups"]}
    # --nodes sets the sizes; the file's price stays.
    assert (groups["ng-general"]["maxSize"], groups["ng-general"]["price"]) == (4, 0.192)
    assert groups["ng-spot"]["price"] == 0.14
    # Two general nodes, one spot node (drained, still there) and the spot nodes added;
    # the Karpenter and Fargate nodes have no price.
    before, after = doc["whatIf"]["before"], doc["whatIf"]["after"]
    assert before["costPerHour"] == pytest.approx(
        2 * 0.192 + 0.14 + 0.14 * before["nodesAdded"]["ng-spot"]
    )
    assert after["costPerHour"] == pytest.approx(
        2 * 0.192 + 0.14 + 0.14 * after["nodesAdded"]["ng-spot"]
    )

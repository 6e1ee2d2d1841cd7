"""`clusterscaler simulate` and `clusterscaler explain` end to end, through the CLI: the demo,
every example scenario with its outcome asserted, the JSON contract, the plot, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
SNAPSHOT = str(EXAMPLES / "snapshots" / "small-cluster.json")
GENERAL = str(EXAMPLES / "cloud-configs" / "general.yaml")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def scenario(capsys: pytest.CaptureFixture[str], name: str, *extra: str) -> list[dict[str, Any]]:
    code, out, err = cli(capsys, "simulate", str(EXAMPLES / "scenarios" / f"{name}.yaml"), "--json", *extra)
    assert code == 0, err
    return json_lines(out)


def of(lines: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [x for x in lines if x["type"] == "event" and x["action"] == action]


def summary(lines: list[dict[str, Any]]) -> dict[str, Any]:
    assert lines[-1]["type"] == "summary"
    return lines[-1]


def test_demo_runs_without_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "simulate")
    assert code == 0
    assert out.startswith("scenario: demo\n")
    assert "TIME      ACTION" in out
    # Web traffic grows the general group, the batch job gets a highmem node, and both
    # shrink back once the load is gone.
    assert "scale-up    general  2 -> 5 for 16 pods" in out
    assert "scale-up    highmem  0 -> 1" in out
    assert "scale-down  highmem  highmem-00001 (empty)" in out
    assert "final nodes     general=2 highmem=0" in out
    assert "still pending   0 pods" in out
    # The summary says what it counts, and the demo says how to simulate one's own cluster.
    assert "scale-downs     3 (4 nodes removed)\n" in out
    assert "(a scale-up or scale-down is one node group's in one loop)" in out
    assert "This is the built-in demo." in out
    assert all(word in out for word in ("SCENARIO.yaml", "--snapshot FILE", "--from-cluster"))


def test_burst_scale_up(capsys: pytest.CaptureFixture[str]) -> None:
    lines = scenario(capsys, "burst-scale-up")
    ups = of(lines, "scale-up")
    # 26 pods of 500m do not fit the two nodes; 7 fit a new node: one scale-up of 4.
    assert [(u["time"], u["nodeGroup"], u["detail"]) for u in ups] == [
        (60.0, "general", "2 -> 6 for 26 pods")
    ]
    ready = of(lines, "node-ready")
    assert [(r["time"], r["detail"]) for r in ready] == [(120.0, "4 nodes")]
    result = summary(lines)
    assert result["finalNodes"] == {"general": 6}
    assert result["stillPending"] == 0
    # Every pending pod waited exactly the group's 60s provisioning delay.
    assert result["podPendingSeconds"] == {"p50": 60.0, "p95": 60.0, "max": 60.0}
    assert not of(lines, "scale-down")


def test_scale_down_after_load_drops(capsys: pytest.CaptureFixture[str]) -> None:
    lines = scenario(capsys, "scale-down")
    downs = of(lines, "scale-down")
    # Unneeded from 2m, removed after --scale-down-unneeded-time=5m: four empty nodes and
    # one drained node (--max-drain-parallelism=1), leaving one node for the 6 pods.
    assert {d["time"] for d in downs} == {420.0}
    assert sorted(d["detail"].split(" ")[1] for d in downs) == ["(drain,", "(empty)", "(empty)", "(empty)", "(empty)"]
    result = summary(lines)
    assert result["finalNodes"] == {"general": 1}
    assert result["nodesRemoved"] == 5
    assert result["stillPending"] == 0
    assert not of(lines, "scale-up")


def test_multi_zone_balancing_and_priority(capsys: pytest.CaptureFixture[str]) -> None:
    lines = scenario(capsys, "multi-zone")
    ups = [(u["time"], u["nodeGroup"], u["detail"].split(" for")[0]) for u in of(lines, "scale-up")]
    # The priority expander picks spot; balancing splits each scale-up across the zones.
    assert ups[:2] == [(60.0, "spot-zone-a", "0 -> 2"), (60.0, "spot-zone-b", "0 -> 2")]
    assert ups[2:4] == [(360.0, "spot-zone-a", "2 -> 4"), (360.0, "spot-zone-b", "2 -> 4")]
    # Spot is at its maximum (4): the rest goes to on-demand, balanced across zones.
    later = {g: d for t, g, d in ups[4:] if t > 360.0}
    assert set(later) == {"ondemand-zone-a", "ondemand-zone-b"}
    result = summary(lines)
    final = result["finalNodes"]
    assert final["spot-zone-a"] == final["spot-zone-b"] == 4
    assert abs(final["ondemand-zone-a"] - final["ondemand-zone-b"]) <= 1
    assert result["stillPending"] == 0


def test_json_lines_stream_events_samples_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    lines = scenario(capsys, "burst-scale-up", "--duration", "2m", "--scan-interval", "30s")
    types = [x["type"] for x in lines]
    assert types.count("sample") == 5  # 0s, 30s, 60s, 90s and 120s
    assert types[-1] == "summary"
    samples = [x for x in lines if x["type"] == "sample"]
    assert [s["time"] for s in samples] == [0.0, 30.0, 60.0, 90.0, 120.0]
    assert samples[-1]["nodes"] == {"general": 6}
    assert samples[-1]["cost"] > samples[0]["cost"] >= 0


def test_plot_is_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "run.png"
    code, out, err = cli(
        capsys, "simulate", str(EXAMPLES / "scenarios" / "burst-scale-up.yaml"), "--plot", str(path)
    )
    assert code == 0, err
    assert f"plot written to {path}" in out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


EXPECTED_ONCE = {
    "scaleUp": [
        {
            "nodeGroup": "general",
            "from": 5,
            "to": 7,
            "pods": ["default/worker-8d9c7b-k2x9q", "default/worker-8d9c7b-m4t7z"],
        }
    ],
    "scaleDown": [],
    "unschedulable": [
        {
            "pod": "default/train-0",
            "reasons": {
                "general": "pod does not fit the node group's template: Insufficient cpu, Insufficient memory"
            },
        }
    ],
    "unremovable": [],
}


def test_once_json_on_a_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys, "simulate", "--snapshot", SNAPSHOT, "--cloud-config", GENERAL, "--once", "--json"
    )
    assert code == 0, err
    assert json.loads(out) == EXPECTED_ONCE


def test_once_scale_down_with_zero_unneeded_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Without pending pods the loop evaluates scale-down; with 0s every removable node is listed.
    doc = json.loads(Path(SNAPSHOT).read_text())
    doc["items"] = [i for i in doc["items"] if i["kind"] != "Pod" or i["spec"].get("nodeName")]
    path = tmp_path / "running.json"
    path.write_text(json.dumps(doc))
    code, out, err = cli(
        capsys, "simulate", "--snapshot", str(path), "--cloud-config", GENERAL,
        "--once", "--json", "--scale-down-unneeded-time=0s",
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["scaleUp"] == [] and result["unschedulable"] == []
    assert result["scaleDown"] == [{"node": "general-e", "nodeGroup": "general", "empty": False}]
    unremovable = {u["node"]: u for u in result["unremovable"]}
    assert unremovable["general-c"]["blockingPod"] == {"pod": "default/api-66b9f7-aaaaa", "reason": "NotEnoughPdb"}
    assert unremovable["general-d"]["blockingPod"]["reason"] == "UnmovableKubeSystemPod"
    assert unremovable["legacy-1"]["reason"] == "NotAutoscaled"
    assert unremovable["general-a"] == {
        "node": "general-a",
        "reason": "NotUnderutilized",
        "detail": "cpu utilization 0.944 >= 0.5",
        "blockingPod": None,
    }


def test_explain_snapshot_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "explain", "--snapshot", SNAPSHOT, "--cloud-config", GENERAL, "--json")
    assert code == 0, err
    doc = json.loads(out)
    # The keys of simulate --once --json, every pending pod's answers, then the answers
    # grouped by reason.
    assert list(doc) == ["scaleUp", "scaleDown", "unschedulable", "unremovable", "pendingPods", "summary"]
    reasons = {e["pod"]: e["reasons"]["general"] for e in doc["unschedulable"]}
    assert reasons["default/prefetch-cache"].startswith("expendable: priority -100")
    assert reasons["default/report-1"].startswith("too young: pending for 0s, scale-up waits 5m0s")
    assert reasons["default/train-0"].endswith("Insufficient cpu, Insufficient memory")
    # Nodes are answered even though this loop scales up.
    assert doc["scaleDown"] == [{"node": "general-e", "nodeGroup": "general", "empty": False}]
    assert {u["node"]: u["reason"] for u in doc["unremovable"]} == {
        "general-a": "NotUnderutilized",
        "general-b": "NotUnderutilized",
        "general-c": "BlockedByPod",
        "general-d": "BlockedByPod",
        "legacy-1": "NotAutoscaled",
    }
    code, out, _ = cli(capsys, "explain", "--snapshot", SNAPSHOT, "--cloud-config", GENERAL)
    assert code == 0
    assert "default/worker-8d9c7b-k2x9q  general     yes             scale-up 5 -> 7" in out
    assert "general-e  general     yes        3% memory    unneeded (drain 1 pod)" in out


BAD_INPUT = [
    (["simulate", "--snapshot", "/nonexistent.json", "--cloud-config", GENERAL], "--snapshot '/nonexistent.json': cannot read the file"),
    (["simulate", "--snapshot", SNAPSHOT, "--node-group-bounds", SNAPSHOT], f"{SNAPSHOT}: expected nodeGroups: {{<node group>: {{minSize: <int>, maxSize: <int>, price: <per node-hour>}}}}, got ['apiVersion', 'items', 'kind', 'metadata']"),
    (["simulate", "--snapshot", SNAPSHOT, "--cloud-config", SNAPSHOT], "apiVersion: unknown field; expected nodeGroups"),
    (["simulate", "--cloud-provider=aws"], "--cloud-provider: simulate runs on an in-memory cluster and needs the sim provider (another provider only with --from-cluster, which reads its node groups), got 'aws'"),
    (["simulate", "/nonexistent.yaml"], "scenario '/nonexistent.yaml': cannot read the file"),
    (["explain", "--snapshot", SNAPSHOT, "--nodes=1:3:gpu"], "--nodes='1:3:gpu': node group 'gpu': expected one of the node groups inferred from the snapshot (general)"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT, ids=["missing-snapshot", "bad-node-group-bounds", "bad-cloud-config", "wrong-provider", "missing-scenario", "explain-unknown-nodes-group"])
def test_bad_input_exits_2_naming_the_problem(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    if "--cloud-provider=aws" in argv:
        pytest.importorskip("clusterscaler_aws")
    code, _, err = cli(capsys, *argv)
    assert code == 2
    assert message in err


def test_bad_snapshot_content_names_object_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: List\nitems:\n- kind: Pod\n  metadata: {name: p}\n  spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n")
    code, _, err = cli(capsys, "simulate", "--snapshot", str(path), "--cloud-config", GENERAL, "--once")
    assert code == 2
    assert f"{path}: Pod default/p: spec.containers[0].resources.requests.cpu: expected" in err


def test_scenario_flags_yield_to_command_line_flags(capsys: pytest.CaptureFixture[str]) -> None:
    # The scenario sets --scale-down-unneeded-time=5m; the command line wins.
    lines = scenario(capsys, "scale-down", "--scale-down-unneeded-time=20m", "--duration", "15m")
    assert not of(lines, "scale-down")
    assert summary(lines)["finalNodes"] == {"general": 6}


def test_bad_scenario_flag_value(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"cloudConfig: {GENERAL}\nflags: {{scan-interval: often}}\n")
    code, _, err = cli(capsys, "simulate", str(path))
    assert code == 2
    assert f"{path}: flags.scan-interval: expected a Go duration" in err


def test_spot_outage_backs_off_and_falls_back_to_on_demand(capsys: pytest.CaptureFixture[str]) -> None:
    lines = scenario(capsys, "spot-outage")
    ups = [(u["time"], u["nodeGroup"]) for u in of(lines, "scale-up")]
    # Spot first (priority 20). Each spot group's instances fail: the next loop removes
    # them once, the group backs off and the other spot group is tried, then on-demand.
    assert ups == [(60.0, "spot-zone-b"), (70.0, "spot-zone-a"), (80.0, "ondemand-zone-b")]
    cleanups = [(c["time"], c["nodeGroup"]) for c in of(lines, "cleanup")]
    assert cleanups == [(70.0, "spot-zone-b")] * 2 + [(80.0, "spot-zone-a")] * 2
    assert all("(create-error)" in c["detail"] for c in of(lines, "cleanup"))
    result = summary(lines)
    assert result["stillPending"] == 0
    assert result["finalNodes"] == {
        "ondemand-zone-a": 1, "ondemand-zone-b": 2, "spot-zone-a": 0, "spot-zone-b": 0
    }


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ("{at: 1m, scale: {workload: default/nope, replicas: 3}}",
         "event at 0:01:00 (scale default/nope to 3 replicas): events[0].scale.workload "
         "'default/nope': no such controller"),
        ("{at: 1m, failGroup: {nodeGroup: nope}}",
         "event at 0:01:00 (nope fails to provision (OutOfCapacity)): "
         "events[0].failGroup.nodeGroup: expected one of general, got 'nope'"),
        ("{at: 1m, failGroup: nope}",
         "event at 0:01:00 (nope fails to provision (OutOfCapacity)): events[0].failGroup: "
         "expected one of general, got 'nope'"),
        ("{at: 1m, recoverGroup: ' '}",
         "event at 0:01:00 (  provisions again): events[0].recoverGroup: expected one of "
         "general, got ' '"),
    ],
    ids=["unknown-workload", "unknown-group", "unknown-group-short-form", "blank-group"],
)
def test_events_that_can_never_apply_are_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, event: str, message: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"cloudConfig: {GENERAL}\nevents: [{event}]\n")
    code, _, err = cli(capsys, "simulate", str(path))
    assert code == 2
    # The error names the file and the event.
    assert f"error: {path}: {message}" in err, err


def test_events_on_missing_pods_show_in_the_timeline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"cloudConfig: {GENERAL}\ninitialNodes: {{general: 1}}\nduration: 1m\n"
                    "events: [{at: 10s, deletePods: [default/ghost]}, {at: 20s, cordon: general-00001}]\n")
    code, out, err = cli(capsys, "simulate", str(path), "--json")
    assert code == 0, err
    lines = json_lines(out)
    failed = of(lines, "event-failed")
    assert [f["detail"] for f in failed] == [
        "delete 1 pod: pod default/ghost: expected an existing pod (namespace/name)"
    ]
    assert [e["detail"] for e in of(lines, "event")] == ["cordon general-00001"]


def test_explain_without_input_names_the_inputs_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "explain")
    assert (code, out) == (2, "")
    assert "nothing to explain" in err
    assert all(word in err for word in ("--snapshot FILE", "--from-cluster", "--kubeconfig"))


def test_one_loops_rows_come_cause_before_effect(capsys: pytest.CaptureFixture[str]) -> None:
    """spot-zone-b's instances fail: the loop cleans them up and backs the group off, then
    scales up spot-zone-a instead; the timeline says it in that order."""
    lines = scenario(capsys, "spot-outage")
    at = [x for x in lines if x["type"] == "event" and x["time"] == 70]
    assert [(x["action"], x["nodeGroup"]) for x in at] == [
        ("cleanup", "spot-zone-b"), ("cleanup", "spot-zone-b"), ("backoff", "spot-zone-b"),
        ("scale-up", "spot-zone-a"),
    ]

"""The steady-cluster row runs the `run` command's path end to end on a tiny cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import run, steady


def test_steady_row_lists_loops_scales_and_relists_a_tiny_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = run.main(
        ["--only", "steady-5k", "--scale", "0.001", "--repeat", "1", "--json", "--data-dir", str(tmp_path)]
    )
    doc = json.loads(capsys.readouterr().out)["steady"]
    assert doc["error"] == "", doc["traceback"]
    figures = doc["figures"]
    # 5 nodes x 30 pods, 10 new pending pods for the empty batch group.
    assert figures["nodes"] == 5
    assert figures["pods"] == doc["generated"]["pods"] == 150
    assert figures["steadyPending"] == 0
    assert figures["scaleUpNodes"] > 0
    assert figures["unneeded"] > 0
    assert figures["errors"] == []
    assert len(figures["steadyLoops"]) == len(figures["relists"]) == 1
    assert [t["figure"][:3] for t in doc["targets"]] == ["(a)", "(b)", "(c)", "(d)", "(e)"]
    assert status == 0
    # The generated files are kept and reused.
    stamp = tmp_path / "steady-5k-x0.001-seed9" / "generated.json"
    assert json.loads(stamp.read_text())["version"] == steady.GENERATOR_VERSION


def test_the_fake_api_serves_list_pages_by_continue_token(tmp_path: Path) -> None:
    steady._write_pages(tmp_path, "pods", "PodList", [{"metadata": {"name": str(i)}} for i in range(501)])
    from kubernetes import client

    api = client.CoreV1Api(steady.fake_api_client(tmp_path))
    first = json.loads(api.list_pod_for_all_namespaces(limit=500, _preload_content=False).data)
    assert len(first["items"]) == 500
    assert first["metadata"]["continue"] == "1"
    second = json.loads(
        api.list_pod_for_all_namespaces(limit=500, _continue="1", _preload_content=False).data
    )
    assert [p["metadata"]["name"] for p in second["items"]] == ["500"]
    assert "continue" not in second["metadata"]

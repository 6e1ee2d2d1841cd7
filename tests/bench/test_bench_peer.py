"""`python -m bench peer`'s contract without building upstream CA: arguments, rows, targets,
the workload it applies, what it reads from watches and /metrics, and the helper module
that builds CA."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.testing import upstreamca

from bench.peer import observe, run, workload
from bench.peer.observe import event_counts, events_written
from bench.peer.run import CA, CLUSTERSCALER, Row, evaluate, render
from bench.peer.scenarios import POOL_LABEL, SCENARIOS, Workload
from bench.peer.workload import existing_nodes, provider_objects, workload_objects

REQUIRED = {"scenario", "autoscaler", "decision_latency_s", "end_to_end_s", "nodes_added",
            "pods_pending", "cpu_s", "peak_rss_mib"}


def _row(autoscaler: str, run_no: int = 1, *, latency: float = 3.0, e2e: float = 20.0,
         cpu: float = 4.0, rss: float = 100.0, groups: dict[str, int] | None = None,
         pending: int = 0, error: str = "") -> Row:
    groups = {"pool-a": 13, "pool-b": 25} if groups is None else groups
    return Row("scale-up-1k", autoscaler, run_no, decision_latency_s=latency, end_to_end_s=e2e,
               nodes_added=sum(groups.values()), nodes_per_group=groups, pods=1000,
               pods_pending=pending, cpu_s=cpu, startup_cpu_s=1.0, peak_rss_mib=rss,
               error=error)


def _verdicts(rows: list[Row]) -> dict[str, run.Verdict]:
    return {v.target: v for v in evaluate("scale-up-1k", rows)}


# --------------------------------------------------------------------------- arguments


def test_arguments() -> None:
    args = run.parse_args(["--only", "scale-up-1k", "--repeat", "3", "--json"])
    assert (args.only, args.repeat, args.json, args.build) == (["scale-up-1k"], 3, True, False)
    assert run.parse_args(["--build"]).build


@pytest.mark.parametrize("argv", [["--only", "no-such-row"], ["--repeat", "0"]],
                         ids=["unknown-scenario", "zero-repeat"])
def test_bad_arguments_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run.parse_args(argv)
    assert exc.value.code == 2


def test_smallest_scale_up_is_scale_up_1k() -> None:
    assert SCENARIOS["scale-up-1k"].pods == 1000
    assert min((s for s in SCENARIOS.values() if s.name.startswith("scale-up")),
               key=lambda s: s.pods).name == "scale-up-1k"


def test_not_built_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLUSTERSCALER_CACHE", str(tmp_path))
    assert run.main(["--only", "scale-up-1k"]) == 2
    assert "--build" in capsys.readouterr().err


# --------------------------------------------------------------------------- rows and targets


def test_row_json_has_the_contract_fields() -> None:
    doc = _row(CA).to_json()
    assert set(doc) >= REQUIRED
    assert doc["autoscaler"] == "cluster-autoscaler"
    assert doc["nodes_added"] == 38
    json.dumps(doc)


def test_targets_met_when_clusterscaler_is_at_least_as_good() -> None:
    verdicts = _verdicts([_row(CA), _row(CLUSTERSCALER, latency=2.0, e2e=20.0, cpu=5.9, rss=90)])
    assert all(v.met for v in verdicts.values()), verdicts
    assert set(verdicts) == {"decision latency <= CA", "end to end <= CA",
                             "CPU seconds within 1.5x CA", "peak RSS <= CA", "equal decisions"}


@pytest.mark.parametrize(
    ("ours", "missed"),
    [
        ({"latency": 3.5}, "decision latency <= CA"),
        ({"e2e": 21.0}, "end to end <= CA"),
        ({"cpu": 6.1}, "CPU seconds within 1.5x CA"),
        ({"rss": 101.0}, "peak RSS <= CA"),
        ({"groups": {"pool-a": 14, "pool-b": 25}}, "equal decisions"),
        ({"pending": 3}, "equal decisions"),
    ],
    ids=["latency", "end-to-end", "cpu", "rss", "nodes-per-group", "pods-pending"],
)
def test_each_target_can_be_missed(ours: dict[str, object], missed: str) -> None:
    verdicts = _verdicts([_row(CA), _row(CLUSTERSCALER, **ours)])  # type: ignore[arg-type]
    assert [t for t, v in verdicts.items() if not v.met] == [missed]


def test_medians_over_runs_and_decisions_run_by_run() -> None:
    rows = [_row(CA, 1, latency=3), _row(CA, 2, latency=5), _row(CA, 3, latency=4),
            _row(CLUSTERSCALER, 1, latency=4.5), _row(CLUSTERSCALER, 2, latency=1),
            _row(CLUSTERSCALER, 3, latency=2, groups={"pool-a": 12})]
    verdicts = _verdicts(rows)
    assert verdicts["decision latency <= CA"].met  # median 2 <= median 4
    assert not verdicts["equal decisions"].met
    assert "run 3" in verdicts["equal decisions"].detail


def test_decisions_ca_itself_reached_in_another_run_are_equal() -> None:
    """CA's own runs can end one node apart (kube-scheduler's timing): a run of ours ending
    where one of CA's ended is no difference; a decision CA never reached still is."""
    rows = [_row(CA, 1, groups={"pool-a": 12, "pool-b": 25}), _row(CA, 2),
            _row(CLUSTERSCALER, 1), _row(CLUSTERSCALER, 2, groups={"pool-a": 12, "pool-b": 25})]
    verdict = _verdicts(rows)["equal decisions"]
    assert verdict.met
    assert "whose own 2 runs differ" in verdict.detail
    rows[3] = _row(CLUSTERSCALER, 2, groups={"pool-a": 11, "pool-b": 25})
    assert not _verdicts(rows)["equal decisions"].met
    # CA the same in every run: any difference is one.
    same = [_row(CA, 1), _row(CA, 2), _row(CLUSTERSCALER, 1),
            _row(CLUSTERSCALER, 2, groups={"pool-a": 12, "pool-b": 25})]
    assert not _verdicts(same)["equal decisions"].met


def test_a_failed_run_is_not_met() -> None:
    verdicts = evaluate("scale-up-1k", [_row(CA), _row(CLUSTERSCALER, error="exited 1")])
    assert [(v.target, v.met) for v in verdicts] == [("every run completed", False)]
    assert "exited 1" in verdicts[0].detail


def test_render_prints_both_side_by_side_with_verdicts() -> None:
    text = render([_row(CA), _row(CLUSTERSCALER, latency=9.0)], ["scale-up-1k"], "header")
    lines = text.splitlines()
    assert lines[0] == "header"
    assert any(CA in line and CLUSTERSCALER in line for line in lines)
    assert re.search(r"decision latency\s+3\.00 s\s+9\.00 s", text)
    assert "NOT MET decision latency <= CA" in text
    assert "MET     equal decisions" in text


# --------------------------------------------------------------------------- the workload


def test_workload_is_real_shaped_and_pinned_to_its_pool() -> None:
    scenario = SCENARIOS["scale-up-1k"]
    objects = workload_objects(scenario)
    assert objects[0] == {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": scenario.namespace}}
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert sum(d["spec"]["replicas"] for d in deployments) == scenario.pods
    for d, w in zip(deployments, scenario.workloads, strict=True):
        pod = d["spec"]["template"]["spec"]
        app, sidecar = pod["containers"]
        assert app["resources"]["requests"] == {"cpu": f"{w.cpu_m}m", "memory": f"{w.memory_mi}Mi"}
        assert app["resources"]["limits"]["cpu"] == f"{2 * w.cpu_m}m"
        assert app["livenessProbe"] and app["readinessProbe"] and app["env"] and app["envFrom"]
        assert sidecar["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}
        assert pod["nodeSelector"] == {POOL_LABEL: w.pool}
        assert {"key": "kwok-provider", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        # The envFrom references exist, as in a real namespace.
        names = {(o["kind"], o["metadata"]["name"]) for o in objects}
        assert {("ConfigMap", f"{w.name}-config"), ("Secret", f"{w.name}-secrets")} <= names


def test_provider_configmaps_carry_every_group_with_its_pool_label() -> None:
    scenario = SCENARIOS["scale-up-5k"]
    config, templates = provider_objects(scenario)
    assert config["metadata"]["name"] == "kwok-provider-config"
    text = templates["data"]["templates"]
    for group in scenario.groups:
        assert f"{group.name}-template" in text
        assert f"{POOL_LABEL}: {group.name}" in text
        assert f"max-count: '{group.max_count}'" in text


def test_autoscaler_commands_share_their_arguments(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    flags = SCENARIOS["scale-up-1k"].flags
    ca = run.autoscaler_command(CA, kubeconfig, 8085, flags)
    ours = run.autoscaler_command(CLUSTERSCALER, kubeconfig, 8085, flags)
    assert ca[0] == str(upstreamca.binary_path())
    assert ca[1:] == ours[-len(ca) + 1:]
    assert "--cloud-provider=kwok" in ca and "--scan-interval=1s" in ca
    env = run.autoscaler_env(kubeconfig)
    assert (env["KWOK_PROVIDER_MODE"], env["POD_NAMESPACE"], env["KUBECONFIG"]) == (
        "local", "kube-system", str(kubeconfig))


# --------------------------------------------------------------------------- observation


def _event(kind: str, name: str, **fields: object) -> observe._Event:
    obj = {"metadata": {"name": name, **fields.pop("metadata", {})}, **fields}  # type: ignore[dict-item]
    return observe._decode_event(json.dumps({"type": kind, "object": obj}).encode())


def test_watch_counts_nodes_per_group_and_bound_pods(tmp_path: Path) -> None:
    watch = observe.ClusterWatch("https://127.0.0.1:1", tmp_path / "ca.crt", "t", "peer",
                                 "kwok-nodegroup")
    watch._on_node(_event("ADDED", "pool-a-x1", metadata={"labels": {"kwok-nodegroup": "pool-a"}}))
    watch._on_node(_event("ADDED", "pool-b-x2", metadata={"labels": {"kwok-nodegroup": "pool-b"}}))
    watch._on_node(_event("MODIFIED", "pool-b-x2", metadata={"labels": {"kwok-nodegroup": "pool-b"}}))
    watch._on_node(_event("ADDED", "pool-b-x3", metadata={"labels": {"kwok-nodegroup": "pool-b"}}))
    watch._on_node(_event("DELETED", "pool-b-x3"))
    assert watch.nodes_per_group() == {"pool-a": 1, "pool-b": 1}
    first = watch.first_node_at()
    assert first is not None and first == watch.node_added["pool-a-x1"]

    watch._on_pod(_event("ADDED", "web-1", spec={}, status={"phase": "Pending"}))
    watch._on_pod(_event("ADDED", "web-2", spec={"nodeName": ""}))
    assert watch.bound_and_pending() == (0, 2)
    watch._on_pod(_event("MODIFIED", "web-1", spec={"nodeName": "pool-a-x1"}))
    assert watch.bound_and_pending() == (1, 1)
    watch._on_pod(_event("MODIFIED", "web-2", metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"},
                         spec={}))
    assert watch.bound_and_pending() == (1, 0)


CA_METRICS = """\
# HELP cluster_autoscaler_function_duration_seconds Time taken by various parts of CA main loop.
# TYPE cluster_autoscaler_function_duration_seconds histogram
cluster_autoscaler_function_duration_seconds_bucket{function="main",le="0.01"} 3
cluster_autoscaler_function_duration_seconds_bucket{function="main",le="+Inf"} 4
cluster_autoscaler_function_duration_seconds_sum{function="main"} 0.125
cluster_autoscaler_function_duration_seconds_count{function="main"} 4
cluster_autoscaler_function_duration_seconds_sum{function="scaleUp"} 9
cluster_autoscaler_function_duration_seconds_count{function="scaleUp"} 1
"""


def test_main_loop_metric() -> None:
    assert observe.parse_main_loop(CA_METRICS) == observe.LoopMetric(count=4.0, total=0.125)
    assert observe.parse_main_loop("cluster_autoscaler_last_activity 1\n") is None


def test_api_requests_by_method_from_either_exposition() -> None:
    """CA's client-go and our prometheus_client print the same series (ints, floats)."""
    text = """\
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 120
rest_client_requests_total{code="404",host="127.0.0.1:6443",method="GET"} 3
rest_client_requests_total{code="<error>",host="127.0.0.1:6443",method="PATCH"} 1.0
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 40.0
rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="GET"} 123
"""
    assert observe.parse_requests(text) == {"GET": 123.0, "PATCH": 41.0}
    assert observe.parse_requests(CA_METRICS) == {}


def test_render_prints_the_api_requests() -> None:
    ca = _row(CA)
    ca.api_requests = {"GET": 10, "PATCH": 4}
    ours = _row(CLUSTERSCALER)
    ours.api_requests = {"GET": 12, "PATCH": 4, "POST": 1}
    text = render([ca, ours], ["scale-up-1k"], "header")
    assert re.search(r"API requests\s+14\s+17", text), text
    assert "    API requests: GET 12, PATCH 4, POST 1" in text


def test_process_usage_of_this_process() -> None:
    import os

    sum(i * i for i in range(200_000))
    assert observe.cpu_seconds(os.getpid()) > 0
    assert observe.peak_rss_bytes(os.getpid()) > 10 * 1024 * 1024
    assert observe.cpu_seconds(2**22 + 12345) == 0  # no such process


# --------------------------------------------------------------------------- building CA


CA_GO_MOD = """\
module k8s.io/autoscaler/cluster-autoscaler

go 1.26.0

godebug default=go1.26

require (
\tk8s.io/api v0.36.2
\tk8s.io/kube-scheduler v0.0.0
)

replace github.com/rancher/go-rancher => github.com/rancher/go-rancher v0.1.0

replace k8s.io/api => k8s.io/api v0.36.2 // staging

replace k8s.io/autoscaler/cluster-autoscaler/apis => ./apis

replace (
\tk8s.io/kube-scheduler => k8s.io/kube-scheduler v0.36.2
)
"""


def test_pseudo_version_names_the_release_commit() -> None:
    assert re.fullmatch(r"v0\.0\.0-\d{14}-[0-9a-f]{12}", upstreamca.PSEUDO_VERSION)
    assert upstreamca.PSEUDO_VERSION.endswith(upstreamca.COMMIT[:12])
    assert f"cluster-autoscaler-{upstreamca.VERSION}" == upstreamca.RELEASE
    assert upstreamca.VERSION.startswith("1.36.")


def test_helper_module_copies_replaces_and_pins_apis_at_the_commit() -> None:
    assert upstreamca.replace_lines(CA_GO_MOD) == [
        "github.com/rancher/go-rancher => github.com/rancher/go-rancher v0.1.0",
        "k8s.io/api => k8s.io/api v0.36.2",
        "k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.36.2",
    ]
    from_proxy = upstreamca.helper_go_mod(CA_GO_MOD, None)
    assert f"\tk8s.io/autoscaler/cluster-autoscaler {upstreamca.PSEUDO_VERSION}" in from_proxy
    assert f"\tk8s.io/autoscaler/cluster-autoscaler/apis {upstreamca.PSEUDO_VERSION}" in from_proxy
    assert "./apis" not in from_proxy and "=> ./" not in from_proxy
    assert "godebug default=go1.26" in from_proxy and "\ngo 1.26.0\n" in from_proxy
    from_git = upstreamca.helper_go_mod(CA_GO_MOD, "./cluster-autoscaler")
    assert "\tk8s.io/autoscaler/cluster-autoscaler => ./cluster-autoscaler" in from_git
    assert "\tk8s.io/autoscaler/cluster-autoscaler/apis => ./cluster-autoscaler/apis" in from_git


def test_cache_lies_beside_the_control_plane(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("CLUSTERSCALER_CACHE", str(tmp_path))
    assert upstreamca.binary_path().is_relative_to(tmp_path / "upstream-ca")
    assert not upstreamca.built()
    assert upstreamca.BuildInfo.load() is None
    # The external gRPC provider service is built into the same folder as CA.
    assert upstreamca.service_path().parent == upstreamca.binary_path().parent
    assert not upstreamca.service_built()


def test_a_build_json_written_before_the_service_still_loads(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """A cache holding CA built before the service was: its build.json loads, with the
    service unrecorded (`build` then builds the service and adds it)."""
    monkeypatch.setenv("CLUSTERSCALER_CACHE", str(tmp_path))
    upstreamca.build_dir().mkdir(parents=True)
    (upstreamca.build_dir() / "build.json").write_text(json.dumps({
        "release": upstreamca.RELEASE, "commit": upstreamca.COMMIT,
        "pseudo_version": upstreamca.PSEUDO_VERSION, "source": "module proxy",
        "go_version": "go1.26.8", "build_seconds": 400.0,
        "binary": str(upstreamca.binary_path()),
    }))
    info = upstreamca.BuildInfo.load()
    assert info is not None and info.build_seconds == 400.0
    assert info.service_binary is None and info.service_build_seconds is None


# --------------------------------------------------------------------------- steady state


def test_steady_scenario_starts_from_nodes_made_as_the_provider_makes_them() -> None:
    scenario = SCENARIOS["steady-1k"]
    nodes = existing_nodes(scenario)
    assert len(nodes) == 1000 == dict(scenario.existing)["pool-b"]
    names = {n["metadata"]["name"] for n in nodes}
    assert len(names) == 1000
    node = nodes[0]
    name = node["metadata"]["name"]
    assert re.fullmatch(r"pool-b-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
    assert node["spec"]["providerID"] == f"kwok:{name}"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["kwok-nodegroup"] == "pool-b"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
    assert node["spec"]["taints"] == [{"key": "kwok-provider", "value": "true",
                                       "effect": "NoSchedule"}]
    # Two pods a node at 70% of its CPU: above the utilization threshold, nothing to do.
    (workload,) = scenario.workloads
    assert workload.replicas == 2000
    assert 2 * workload.pod_cpu_m == 0.7 * 8000


def test_steady_targets_compare_the_loop() -> None:
    def row(autoscaler: str, loop: float) -> Row:
        return Row("steady-1k", autoscaler, 1, pods=2000, cpu_s=1.0, peak_rss_mib=100.0,
                   loop_s=loop, loops=50)

    verdicts = {v.target: v for v in evaluate("steady-1k", [row(CA, 0.2), row(CLUSTERSCALER, 0.3)])}
    assert set(verdicts) == {"steady loop <= CA", "peak RSS <= CA", "equal decisions"}
    assert not verdicts["steady loop <= CA"].met
    assert verdicts["equal decisions"].met


def test_json_document_and_rows_saved_as_measured(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The command with the runs replaced: one document {"rows": [...]} on standard output,
    CA first in each pair, and each row appended to DIR/rows.jsonl when measured."""
    calls: list[tuple[str, str, int]] = []

    def fake_run_one(scenario: object, autoscaler: str, run_no: int, workdir: Path, *,
                     progress: bool = False) -> Row:
        name = getattr(scenario, "name", "")
        calls.append((name, autoscaler, run_no))
        return _row(autoscaler, run_no, latency=2.0 if autoscaler == CLUSTERSCALER else 3.0)

    monkeypatch.setattr(upstreamca, "built", lambda: True)
    monkeypatch.setattr(run, "run_one", fake_run_one)
    status = run.main(["--only", "scale-up-1k", "--repeat", "2", "--json",
                       "--work-dir", str(tmp_path)])
    assert status == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(r["autoscaler"], r["run"]) for r in doc["rows"]] == [
        (CA, 1), (CLUSTERSCALER, 1), (CA, 2), (CLUSTERSCALER, 2)]
    assert all(set(r) >= REQUIRED for r in doc["rows"])
    assert {v["target"]: v["met"] for v in doc["targets"]["scale-up-1k"]}[
        "decision latency <= CA"] is True
    assert calls == [("scale-up-1k", CA, 1), ("scale-up-1k", CLUSTERSCALER, 1),
                     ("scale-up-1k", CA, 2), ("scale-up-1k", CLUSTERSCALER, 2)]
    saved = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert saved == doc["rows"]


def test_a_failed_run_makes_the_exit_status_1(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(upstreamca, "built", lambda: True)
    monkeypatch.setattr(run, "run_one", lambda scenario, autoscaler, run_no, workdir, **_: _row(
        autoscaler, run_no, error="control plane: etcd exited" if autoscaler == CA else ""))
    assert run.main(["--only", "scale-up-1k"]) == 1
    out = capsys.readouterr().out
    assert "NOT MET every run completed: cluster-autoscaler run 1: control plane: etcd exited" in out


def test_the_sigterm_handler_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(upstreamca, "built", lambda: True)
    monkeypatch.setattr(run, "run_one", lambda scenario, autoscaler, run_no, workdir, **_: _row(
        autoscaler, run_no))
    assert run.main(["--only", "scale-up-1k", "--json"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


# --------------------------------------------------------------------------- scale-down


def test_scale_down_scenario_empties_four_nodes_in_five() -> None:
    scenario = SCENARIOS["scale-down-1k"]
    assert scenario.kind == "scale-down"
    assert dict(scenario.existing) == {"pool-b": 1000}
    (workload,) = scenario.workloads
    assert workload.replicas == 1000 == scenario.pods
    # One pod a node (two do not fit on 8 cores), above the 50% utilization threshold.
    group = scenario.group("pool-b")
    assert 2 * workload.pod_cpu_m > group.cpu * 1000 >= workload.pod_cpu_m > group.cpu * 500
    assert dict(scenario.remaining) == {"web": 200} and scenario.pods_at_end == 200
    assert scenario.expect_removed == 800
    assert "--scale-down-unneeded-time=30s" in scenario.flags
    assert "--scale-down-delay-after-add=30s" in scenario.flags
    assert "--node-delete-delay-after-taint=0s" in scenario.flags
    assert "--scan-interval=1s" in scenario.flags


def test_scaled_down_changes_only_the_replicas() -> None:
    scenario = SCENARIOS["scale-down-1k"]
    first = [o for o in workload_objects(scenario) if o["kind"] == "Deployment"]
    (after,) = workload.scaled_down(scenario)
    assert after["spec"]["replicas"] == 200
    assert {**after, "spec": {**after["spec"], "replicas": 1000}} == first[0]


def test_watch_times_removals_of_nodes_made_before_the_run(tmp_path: Path) -> None:
    watch = observe.ClusterWatch("https://127.0.0.1:1", tmp_path / "ca.crt", "t", "peer",
                                 "kwok-nodegroup", ignore_nodes=frozenset({"old-1", "old-2"}))
    labels = {"metadata": {"labels": {"kwok-nodegroup": "pool-b"}}}
    watch._on_node(_event("MODIFIED", "old-1", **labels))
    watch._on_node(_event("DELETED", "old-2", **labels))
    watch._on_node(_event("ADDED", "new-1", **labels))
    assert watch.nodes_per_group() == {"pool-b": 1}  # added nodes only
    assert watch.first_node_at() == watch.node_added["new-1"]
    watch._on_node(_event("DELETED", "old-1", **labels))
    watch._on_node(_event("DELETED", "old-1", **labels))  # counted once
    removals = watch.removals()
    assert removals == sorted(removals) and len(removals) == 2
    assert removals[0] == watch.nodes_deleted["old-2"]


def test_scale_down_run_is_done_when_the_expected_nodes_are_removed(tmp_path: Path) -> None:
    scenario = dataclasses.replace(SCENARIOS["scale-down-1k"], expect_removed=2)
    watch = observe.ClusterWatch("https://127.0.0.1:1", tmp_path / "ca.crt", "t", "peer",
                                 "kwok-nodegroup", ignore_nodes=frozenset({"a", "b", "c"}))
    assert run.run_done_at(scenario, watch) is None
    watch.nodes_deleted.update({"c": 7.0, "a": 5.0})
    assert run.run_done_at(scenario, watch) == 7.0
    watch.nodes_deleted["b"] = 9.0  # an excess removal does not move the end
    assert run.run_done_at(scenario, watch) == 7.0


def test_scale_up_run_is_done_at_the_last_pod_bound(tmp_path: Path) -> None:
    scenario = dataclasses.replace(SCENARIOS["scale-up-1k"], workloads=(
        Workload("web", 2, cpu_m=100, memory_mi=100, pool="pool-a"),))
    watch = observe.ClusterWatch("https://127.0.0.1:1", tmp_path / "ca.crt", "t", "peer",
                                 "kwok-nodegroup")
    watch._on_pod(_event("ADDED", "web-1", spec={"nodeName": "n1"}))
    watch._on_pod(_event("ADDED", "web-2", spec={}))
    assert run.run_done_at(scenario, watch) is None
    watch._on_pod(_event("MODIFIED", "web-2", spec={"nodeName": "n1"}))
    assert run.run_done_at(scenario, watch) == watch.last_bound_at


def test_scale_down_targets_and_decisions() -> None:
    def row(autoscaler: str, removed: int, rss: float) -> Row:
        return Row("scale-down-1k", autoscaler, 1, nodes_per_group={"pool-b": -removed},
                   nodes_removed=removed, pods=200, cpu_s=5.0, peak_rss_mib=rss,
                   first_removal_s=31.0, last_removal_s=120.0)

    verdicts = {v.target: v for v in evaluate("scale-down-1k", [row(CA, 800, 150.0),
                                                                row(CLUSTERSCALER, 800, 120.0)])}
    assert set(verdicts) == {"peak RSS <= CA", "equal decisions"}
    assert all(v.met for v in verdicts.values())
    assert verdicts["equal decisions"].detail == "1 run(s): nodes pool-b -800; 0 pods pending"
    verdicts = {v.target: v for v in evaluate("scale-down-1k", [row(CA, 800, 150.0),
                                                                row(CLUSTERSCALER, 801, 120.0)])}
    assert not verdicts["equal decisions"].met
    text = render([row(CA, 800, 150.0), row(CLUSTERSCALER, 800, 120.0)], ["scale-down-1k"], "h")
    assert re.search(r"first node removed\s+31\.00 s\s+31\.00 s", text)
    assert re.search(r"last node removed\s+120\.00 s\s+120\.00 s", text)


# --------------------------------------------------------------------------- affinity mix


def _pod_spec(objects: list[dict[str, object]], name: str) -> dict[str, Any]:
    (d,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name]  # type: ignore[index]
    spec: dict[str, Any] = d["spec"]["template"]["spec"]  # type: ignore[index]
    return spec


def test_affinity_mix_constrains_pods_by_other_pods_in_their_zone() -> None:
    scenario = SCENARIOS["affinity-mix"]
    assert scenario.kind == "scale-up" and scenario.pods == 530
    objects = workload_objects(scenario)
    zone = "topology.kubernetes.io/zone"
    cache = _pod_spec(objects, "cache")
    assert cache["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": zone}]
    assert cache["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "podAffinityTerm"]["labelSelector"] == {"matchLabels": {"app": "cache"}}
    assert "podAffinity" not in cache["affinity"] and "topologySpreadConstraints" not in cache
    web = _pod_spec(objects, "web")
    assert web["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": zone,
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in web["affinity"]["podAntiAffinity"]
    worker = _pod_spec(objects, "worker")
    assert worker["affinity"]["podAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "worker"}}, "topologyKey": zone}]}
    # The plain scale-up rows keep no constraint beyond the preferred anti-affinity.
    for o in workload_objects(SCENARIOS["scale-up-1k"]):
        if o["kind"] == "Deployment":
            spec = o["spec"]["template"]["spec"]
            assert set(spec["affinity"]) == {"nodeAffinity", "podAntiAffinity"}
            assert set(spec["affinity"]["podAntiAffinity"]) == {
                "preferredDuringSchedulingIgnoredDuringExecution"}
            assert "topologySpreadConstraints" not in spec


KUBE_PROXY_M = 100  # the pod upstream's kwok templates carry (cloudprovider.BuildKubeProxy)


def test_affinity_mix_fills_a_node_alike_with_or_without_kube_proxy() -> None:
    """A node holds as many pods of each Deployment as upstream's kwok template does with
    its 100m kube-proxy pod, so that quirk cannot decide the node counts."""
    scenario = SCENARIOS["affinity-mix"]
    for w in scenario.workloads:
        assert w.pool is not None
        cpu_m = scenario.group(w.pool).cpu * 1000
        assert cpu_m // w.pod_cpu_m == (cpu_m - KUBE_PROXY_M) // w.pod_cpu_m, w
    # scale-up-1k's web pods are the ones it decides: 16 a node, 15 beside kube-proxy.
    (web,) = [w for w in SCENARIOS["scale-up-1k"].workloads if w.name == "web"]
    assert (8000 // web.pod_cpu_m, (8000 - KUBE_PROXY_M) // web.pod_cpu_m) == (16, 15)


def test_affinity_mix_templates_carry_their_zone() -> None:
    scenario = SCENARIOS["affinity-mix"]
    _, templates = provider_objects(scenario)
    text = templates["data"]["templates"]
    for group in scenario.groups:
        assert group.zone is not None
        assert f"topology.kubernetes.io/zone: {group.zone}" in text
    assert "topology.kubernetes.io/zone" not in provider_objects(
        SCENARIOS["scale-up-1k"])[1]["data"]["templates"]


def _line(kind: str, name: str, rv: str, **fields: object) -> bytes:
    obj = {"metadata": {"name": name, "resourceVersion": rv}, **fields}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def test_a_watch_resumes_after_the_last_event_read(tmp_path: Path) -> None:
    """A closed watch is opened again after the last resource version read (a bookmark's
    included), not from the start; an expired version (ERROR) starts over."""
    watch = observe.ClusterWatch("https://127.0.0.1:1", tmp_path / "ca.crt", "t", "peer",
                                 "kwok-nodegroup")
    seen: list[str] = []

    def handle(event: observe._Event) -> None:
        seen.append(f"{event.type} {event.object.metadata.name}")

    lines = [_line("ADDED", "web-1", "10", spec={}), b"\n",
             _line("MODIFIED", "web-1", "12", spec={"nodeName": "n1"}),
             _line("BOOKMARK", "", "15")]
    assert watch._consume(lines, handle, "") == "15"
    assert seen == ["ADDED web-1", "MODIFIED web-1"]  # the bookmark is not an object
    assert watch._consume([], handle, "15") == "15"  # closed with nothing new: same place
    gone = json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410}}).encode()
    assert watch._consume([_line("ADDED", "web-2", "16", spec={}), gone], handle, "15") == ""
    assert seen[-1] == "ADDED web-2"


def test_steady_5k_is_prebound_and_its_pods_are_its_replica_sets_own_spread_evenly() -> None:
    scenario = SCENARIOS["steady-5k"]
    assert scenario.prebound and not SCENARIOS["steady-1k"].prebound
    small = dataclasses.replace(
        scenario, existing=(("pool-b", 3),),
        workloads=(dataclasses.replace(scenario.workloads[0], replicas=6),),
    )
    d = workload_objects(small)[-1]
    (rs,) = workload.prebound_replica_sets(small)
    # The ReplicaSet the Deployment would make: its template, the hash label added.
    assert rs["spec"]["replicas"] == 6
    assert rs["spec"]["template"]["spec"] == d["spec"]["template"]["spec"]
    assert rs["spec"]["template"]["metadata"]["labels"] == {
        **d["spec"]["template"]["metadata"]["labels"], "pod-template-hash": "harness"}
    assert rs["spec"]["selector"]["matchLabels"] == rs["metadata"]["labels"] == {
        "app": "web", "pod-template-hash": "harness"}
    nodes = [n["metadata"]["name"] for n in existing_nodes(small)]
    pods = workload.bound_pods(small, nodes)
    assert len(pods) == 6 and len({p["metadata"]["name"] for p in pods}) == 6
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(nodes * 2)
    for pod in pods:
        assert pod["metadata"]["name"].startswith("web-harness-")
        assert pod["metadata"]["labels"] == rs["spec"]["template"]["metadata"]["labels"]
        assert {k: v for k, v in pod["spec"].items() if k != "nodeName"} == (
            d["spec"]["template"]["spec"])


def _core_event(uid: str, kind: str, reason: str, count: int,
           component: str = "cluster-autoscaler") -> dict[str, object]:
    return {"metadata": {"uid": uid}, "involvedObject": {"kind": kind}, "reason": reason,
            "count": count, "source": {"component": component}}


def test_events_written_by_kind_and_reason_since_the_start() -> None:
    before = event_counts({"items": [
        _core_event("a", "ConfigMap", "ScaleDownEmpty", 3),
        _core_event("k", "Pod", "Scheduled", 1, component="default-scheduler"),
    ]})
    after = event_counts({"items": [
        # Patched twice more since: two writes in the span.
        _core_event("a", "ConfigMap", "ScaleDownEmpty", 5),
        _core_event("b", "Node", "ScaleDown", 1),
        _core_event("c", "Node", "ScaleDown", 1),
        _core_event("d", "ConfigMap", "ScaleDownEmpty", 4),
        _core_event("k", "Pod", "Scheduled", 9, component="default-scheduler"),
    ]})
    assert events_written(before, after) == {"ConfigMap ScaleDownEmpty": 6, "Node ScaleDown": 2}
    assert events_written(after, after) == {}


def test_render_prints_the_events_written() -> None:
    ca = _row(CA)
    ca.events = {"Node ScaleDown": 800, "ConfigMap ScaleDownEmpty": 20}
    ours = _row(CLUSTERSCALER)
    ours.events = {"Node ScaleDown": 800, "ConfigMap ScaleDownEmpty": 30}
    text = render([ca, ours], ["scale-up-1k"], "header")
    assert re.search(r"events written\s+820\s+830", text), text
    assert "    events written: Node ScaleDown 800, ConfigMap ScaleDownEmpty 30" in text

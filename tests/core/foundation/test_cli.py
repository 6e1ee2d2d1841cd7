from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from clusterscaler.api import hookimpl
from clusterscaler.commands.cli import main, normalize_bool_flags, parse_autoscaler_args
from clusterscaler.framework.options import GpuLimit, MinMax
from clusterscaler.framework.pluginmanager import PluginHost
from clusterscaler.interfaces.registry import Registry


class _Names:
    """A plugin registering the names the CLI tests select."""

    @hookimpl
    def clusterscaler_register_cloud_providers(self, registry: Registry) -> None:
        registry.add_cloud_provider("fakecloud", lambda context: SimpleNamespace())

    @hookimpl
    def clusterscaler_register_expanders(self, registry: Registry) -> None:
        registry.add_expander("least-waste", lambda options: None)
        registry.add_expander("priority", lambda options: None)
        registry.add_expander("random", lambda options: None, final_only=True)

    @hookimpl
    def clusterscaler_register_estimators(self, registry: Registry) -> None:
        registry.add_estimator("binpacking", lambda options: None)

    @hookimpl
    def clusterscaler_add_options(self, parser: Any) -> None:
        parser.add_argument("--fakecloud-endpoint", default="http://default")


@pytest.fixture
def cli_env(plugin_host: PluginHost, register_plugin: Any) -> tuple[PluginHost, Registry]:
    registry = register_plugin(_Names(), name="names")
    return plugin_host, registry


def parse(cli_env: tuple[PluginHost, Registry], *argv: str) -> Any:
    host, registry = cli_env
    options, _ = parse_autoscaler_args(
        [*argv, "--cloud-provider=fakecloud"], host, registry
    )
    return options


def test_equals_and_space_forms(cli_env: Any) -> None:
    options = parse(
        cli_env,
        "--scan-interval=30s",
        "--scale-down-unneeded-time",
        "1h30m",
        "--max-nodes-total",
        "50",
        "--namespace=autoscaling",
    )
    assert options.scan_interval == timedelta(seconds=30)
    assert options.scale_down_unneeded_time == timedelta(hours=1, minutes=30)
    assert options.max_nodes_total == 50
    assert options.namespace == "autoscaling"


def test_repeatable_flags_and_comma_lists(cli_env: Any) -> None:
    options = parse(
        cli_env,
        "--nodes=1:10:group-a",
        "--nodes",
        "0:5:group-b",
        "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled",
        "--gpu-total=nvidia-tesla-t4:0:8",
        "--gpu-total=nvidia-a100:1:2",
        "--balancing-ignore-label=a",
        "--balancing-ignore-label=b",
        "--expander=priority,least-waste",
        "--cores-total=8:64",
        "--memory-total=16:512",
    )
    assert options.nodes == ["1:10:group-a", "0:5:group-b"]
    assert options.node_group_auto_discovery == ["asg:tag=k8s.io/cluster-autoscaler/enabled"]
    assert options.gpu_total == [GpuLimit("nvidia-tesla-t4", 0, 8), GpuLimit("nvidia-a100", 1, 2)]
    assert options.balancing_ignore_label == ["a", "b"]
    assert options.expander == ["priority", "least-waste"]
    assert options.cores_total == MinMax(8, 64)
    assert options.memory_total == MinMax(16, 512)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--scale-down-enabled=false"], False),
        (["--scale-down-enabled", "false"], False),
        (["--scale-down-enabled"], True),
        (["--scale-down-enabled=true"], True),
        ([], True),
    ],
    ids=["equals-false", "space-false", "bare", "equals-true", "default"],
)
def test_boolean_forms(cli_env: Any, argv: list[str], expected: bool) -> None:
    assert parse(cli_env, *argv).scale_down_enabled is expected


def test_bare_boolean_does_not_swallow_the_next_flag(cli_env: Any) -> None:
    options = parse(cli_env, "--balance-similar-node-groups", "--scan-interval=1m")
    assert options.balance_similar_node_groups is True
    assert options.scan_interval == timedelta(minutes=1)


def test_normalize_leaves_other_tokens() -> None:
    assert normalize_bool_flags(["--a", "x", "--b", "false", "--", "--a"], {"--a", "--b"}) == [
        "--a=true",
        "x",
        "--b=false",
        "--",
        "--a",
    ]


def test_plugin_flags_reach_options_extra(cli_env: Any) -> None:
    options = parse(cli_env, "--fakecloud-endpoint=http://127.0.0.1:9")
    assert options.extra["fakecloud_endpoint"] == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--scan-interval=10"], ["--scan-interval", "'10'", "Go duration"]),
        (["--max-nodes-total=many"], ["--max-nodes-total", "'many'", "an integer"]),
        (["--cores-total=64"], ["--cores-total", "'64'", "<min>:<max>"]),
        (["--scale-down-enabled=maybe"], ["--scale-down-enabled", "'maybe'", "true or false"]),
        (["--gpu-total=t4:3:1"], ["--gpu-total", "'t4:3:1'", "min <= max"]),
        (["--expander=least-waste,cheapest"], ["--expander", "'cheapest'", "least-waste, priority, random"]),
        (["--estimator=magic"], ["--estimator", "'magic'", "binpacking"]),
        (["--scale-down-utilization-threshold=2"], ["--scale-down-utilization-threshold", "between 0 and 1"]),
        (["--no-such-flag=1"], ["unrecognized arguments", "--no-such-flag"]),
        (["--scale-down-unneeded"], ["unrecognized arguments"]),
    ],
    ids=["duration", "int", "minmax", "bool", "gpu", "expander", "estimator", "ratio", "unknown", "no-abbreviation"],
)
def test_bad_values_exit_2_naming_flag_value_and_form(
    cli_env: Any, capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse(cli_env, *argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err


def test_unknown_cloud_provider_lists_installed(cli_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    host, registry = cli_env
    with pytest.raises(SystemExit) as info:
        parse_autoscaler_args(["--cloud-provider=nimbus"], host, registry)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "'nimbus'" in err
    assert "fakecloud" in err


def test_deprecated_flag_is_accepted_with_warning(cli_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    options = parse(cli_env, "--max-empty-bulk-delete=20")
    assert options.max_empty_bulk_delete == 20
    captured = capsys.readouterr()
    assert "deprecated_flag" in captured.out + captured.err
    assert "--max-scale-down-parallelism" in captured.out + captured.err


def test_top_level_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "simulate", "explain", "plugins", "proportional"):
        assert command in out

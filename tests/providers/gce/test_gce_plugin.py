"""Plugin wiring: entry point, registration, the GCE flags through the CLI, option checks
before any network, and the Google SDK kept out of commands that do not build the provider."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from clusterscaler.api import ConfigurationError, Registry
from clusterscaler.commands.cli import parse_autoscaler_args
from clusterscaler.framework.pluginmanager import PluginHost
from clusterscaler.testing import RegisterPlugin
from clusterscaler_gce import plugin


def test_entry_point_is_installed() -> None:
    eps = [ep for ep in entry_points(group="clusterscaler") if ep.name == "gce"]
    assert [ep.value for ep in eps] == ["clusterscaler_gce.plugin"]


def test_registers_the_gce_provider(register_plugin: RegisterPlugin) -> None:
    registry = register_plugin(plugin, name="gce", distribution="clusterscaler-gce")
    registered = registry.cloud_providers["gce"]
    assert registered.factory is plugin.build_provider
    assert registered.source.distribution == "clusterscaler-gce"


@pytest.mark.parametrize(
    ("argv", "concurrent", "wait"),
    [
        ([], 1, timedelta(seconds=5)),
        (["--gce-concurrent-refreshes=4", "--gce-mig-instances-min-refresh-wait-time=30s"], 4, timedelta(seconds=30)),
        (["--gce-concurrent-refreshes", "2", "--gce-mig-instances-min-refresh-wait-time", "1m30s"], 2, timedelta(seconds=90)),
    ],
    ids=["defaults", "equals-form", "space-form"],
)
def test_flags_reach_options_extra_through_the_cli(installed_plugins: tuple[PluginHost, Registry], argv: list[str], concurrent: int, wait: timedelta) -> None:
    host, registry = installed_plugins
    options, _ = parse_autoscaler_args(["--cloud-provider=gce", "--nodes=0:3:p-12345/us-central1-b/pool", *argv], host, registry)
    assert options.extra["gce_concurrent_refreshes"] == concurrent
    assert options.extra["gce_mig_instances_min_refresh_wait_time"] == wait


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gce-concurrent-refreshes=0"], "--gce-concurrent-refreshes='0': expected a positive integer"),
        (["--gce-mig-instances-min-refresh-wait-time=soon"], "--gce-mig-instances-min-refresh-wait-time='soon': expected a Go duration"),
    ],
)
def test_bad_flag_values_exit_2_naming_flag_and_form(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    plugin.clusterscaler_add_options(parser=parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_check_options_needs_no_network(tmp_path: Path) -> None:
    import dataclasses

    from clusterscaler.api import AutoscalingOptions

    config = tmp_path / "gce.conf"
    config.write_text("[global]\nproject-id = p-12345\nlocal-zone = us-central1-b\n")
    good = dataclasses.replace(AutoscalingOptions(), cloud_config=str(config), node_group_auto_discovery=["mig:namePrefix=x,min=0,max=1"])
    plugin.check_options(good)
    with pytest.raises(ConfigurationError, match="no node groups; give --nodes="):
        plugin.check_options(dataclasses.replace(good, node_group_auto_discovery=[]))
    with pytest.raises(ConfigurationError, match="max missing"):
        plugin.check_options(dataclasses.replace(good, node_group_auto_discovery=["mig:namePrefix=x,min=0"]))
    regional = plugin.settings_from_options(dataclasses.replace(good, regional=True))
    assert regional.cloud_config.regional


def test_cli_rejects_bad_specs_before_starting(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).with_name("clusterscaler"))
    proc = subprocess.run(
        [exe, "--cloud-provider=gce", "--nodes=3:1:p-12345/us-central1-b/pool", f"--kubeconfig={tmp_path / 'none'}"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--nodes='3:1:p-12345/us-central1-b/pool': max 1 is below min 3" in proc.stderr + proc.stdout


def test_plugins_command_does_not_import_the_google_sdk() -> None:
    probe = (
        "import json, sys, contextlib, io\n"
        "from clusterscaler.commands.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['plugins', '--json'])\n"
        "data = json.loads(out.getvalue())\n"
        "print(json.dumps({'code': code, 'gce': 'gce' in data['cloudProviders'],"
        " 'google': sorted(m for m in sys.modules if m.startswith('google'))}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "gce": True, "google": []}

"""`clusterscaler plugins` as users run it, over the distributions installed in this venv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXECUTABLE = str(Path(sys.executable).with_name("clusterscaler"))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXECUTABLE, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def test_json_lists_installed_distributions_and_names() -> None:
    result = run("plugins", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert list(doc) == [
        "distributions", "cloudProviders", "expanders", "estimators", "podFilters",
        "podListProcessors",
    ]
    core = next(d for d in doc["distributions"] if d["name"] == "clusterscaler")
    assert set(core) == {"name", "version", "entryPoints"}
    assert core["entryPoints"] == [
        "estimators", "expanders", "pod-filters", "pod-list-processors", "sim",
    ]
    assert {"least-waste", "most-pods", "least-nodes", "price", "priority", "random"} <= set(
        doc["expanders"]
    )
    assert "binpacking" in doc["estimators"]
    assert "sim" in doc["cloudProviders"]
    assert {"mirror", "safe-to-evict", "local-storage", "pdb"} <= set(doc["podFilters"])
    assert doc["podListProcessors"] == ["capacity-buffers", "provisioning-request-consumers"]
    for key in ("cloudProviders", "expanders", "estimators", "podFilters", "podListProcessors"):
        assert doc[key] == sorted(doc[key])
    assert [d["name"] for d in doc["distributions"]] == sorted(d["name"] for d in doc["distributions"])


def test_disabled_plugin_disappears_from_the_listing() -> None:
    import os

    env = {**os.environ, "CLUSTERSCALER_DISABLE_PLUGINS": "sim"}
    doc = json.loads(run("plugins", "--json", env=env).stdout)
    assert "sim" not in doc["cloudProviders"]
    doc = json.loads(run("plugins", "--json", "--disable-plugins=expanders").stdout)
    assert "least-waste" not in doc["expanders"]


def test_table_names_each_distribution_and_its_hooks() -> None:
    result = run("plugins")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if " sim " in f" {line} ")
    assert line.split()[0] == "clusterscaler"
    assert "register_cloud_providers" in line
    assert "expanders: " in result.stdout
    assert "pod-list processors: capacity-buffers, provisioning-request-consumers" in result.stdout

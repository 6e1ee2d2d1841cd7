"""Every flag of upstream Cluster Autoscaler parses, with upstream's default, in both
spellings; the flags whose feature is missing say so once; the manifests and command lines
of deploy/ and docs/ parse.

The upstream list is data (`upstream_flags.yaml`), read from upstream's source: a flag added
upstream is added there, and this test names what is missing here.
"""

from __future__ import annotations

import re
import shlex
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import build_parser, load_plugins, parse_autoscaler_args
from clusterscaler.framework.options import (
    BOOL,
    CIDRS,
    DURATION,
    FLOAT,
    INT,
    PROVIDER_FLAGS,
    QUANTITY,
    SEVERITY,
    STRING,
    UINT,
    AutoscalingOptions,
    FlagSpec,
    all_flag_specs,
    flag_specs,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DATA = yaml.safe_load((HERE / "upstream_flags.yaml").read_text())
UPSTREAM = [row for section in ("flags_go", "main_go", "klog", "gce") for row in DATA[section]]
SPECS = {spec.name: spec for spec in all_flag_specs()}
# Where our default differs from upstream's on purpose (the data says why).
OUR_DEFAULT = {"cloud-provider": "sim"}


def dashed(name: str) -> str:
    return name.replace("_", "-")


def test_the_data_holds_all_of_flags_go() -> None:
    # flags.go declares 137 flags; main.go and klog add the logging and leader-election ones.
    assert len(DATA["flags_go"]) == 137
    assert len({dashed(row["name"]) for row in UPSTREAM}) == 168


def test_every_upstream_flag_is_accepted() -> None:
    missing = sorted({dashed(row["name"]) for row in UPSTREAM} - set(SPECS))
    assert missing == []


@pytest.fixture(scope="module")
def plugins() -> Any:
    return load_plugins([])


def parse(plugins: Any, argv: list[str]) -> tuple[AutoscalingOptions, Any]:
    host, registry = plugins
    return parse_autoscaler_args(argv, host, registry, warn=False)


def value_of(options: AutoscalingOptions, spec: FlagSpec) -> Any:
    if spec.owner is not None:
        return options.extra[spec.dest]
    return getattr(options, spec.dest)


def default_argv(spell: Any) -> list[str]:
    argv = []
    for row in UPSTREAM:
        name = dashed(row["name"])
        text = OUR_DEFAULT.get(name, row["default"])
        if text == "[]":
            continue  # an empty list is no occurrence of the flag
        argv.append(f"--{spell(name)}={text}")
    return argv


@pytest.mark.parametrize("spell", [lambda n: n, lambda n: n.replace("-", "_")], ids=["dashes", "underscores"])
def test_every_upstream_default_parses_to_our_default(plugins: Any, spell: Any) -> None:
    """All of upstream's flags at once, each given its upstream default: the result is our
    defaults, no more no less, and nothing is warned about but the deprecated names."""
    options, ns = parse(plugins, default_argv(spell))
    for row in UPSTREAM:
        spec = SPECS[dashed(row["name"])]
        assert value_of(options, spec) == spec.default, spec.flag
    events = {(event, fields["flag"]) for event, fields in ns.startup_warnings}
    assert events == {("deprecated_flag", "--cluster-snapshot-parallelism")}


@pytest.mark.parametrize(
    "row", [r for r in UPSTREAM if r["default"] == "[]"], ids=lambda r: r["name"]
)
def test_list_flags_default_to_empty_and_repeat(plugins: Any, row: dict[str, str]) -> None:
    spec = SPECS[row["name"]]
    assert spec.default == []
    if row["name"] in ("nodes", "node-group-auto-discovery", "gpu-total", "bypassed-scheduler-names"):
        return  # their values are checked by the provider or against other flags
    options, _ = parse(plugins, [f"--{row['name']}=a", f"--{row['name']}=b"])
    assert value_of(options, spec) == ["a", "b"]


def test_go_style_v_and_klog_names(plugins: Any) -> None:
    options, _ = parse(plugins, ["-v=5", "--log_file=/tmp/x.log", "--logtostderr=false", "--skip_headers"])
    assert (options.v, options.log_file, options.logtostderr, options.skip_headers) == (
        5, "/tmp/x.log", False, True,
    )  # fmt: skip


def other_value(spec: FlagSpec) -> str:
    """A valid value other than the flag's default, in command-line form."""
    default = spec.default
    if spec.kind == BOOL:
        return "false" if default else "true"
    if spec.kind in (INT, UINT, QUANTITY):
        return str(default + 3)
    if spec.kind == FLOAT:
        return str(default + 0.5)
    if spec.kind == DURATION:
        return f"{int((default + timedelta(seconds=7)).total_seconds())}s"
    if spec.kind == SEVERITY:
        return "ERROR" if default != "ERROR" else "INFO"
    if spec.kind == CIDRS:
        return "10.0.0.0/8"
    if spec.kind == STRING:
        return "text/plain" if spec.name == "kube-api-content-type" else "/some/value"
    raise AssertionError(f"no other value for {spec.flag} of kind {spec.kind}")


NO_EFFECT = [spec for spec in all_flag_specs() if spec.no_effect]
FLAGS_WITH_RULES = {
    # Upstream refuses these values unless another flag is set: tested with it below.
    "drain-priority-config",
}


@pytest.mark.parametrize("spec", [s for s in NO_EFFECT if s.name not in FLAGS_WITH_RULES], ids=lambda s: s.name)
def test_a_flag_with_no_effect_warns_once_naming_itself(plugins: Any, spec: FlagSpec) -> None:
    value = other_value(spec)
    _, ns = parse(plugins, [f"--{spec.name}={value}"])
    warnings = [fields for event, fields in ns.startup_warnings if event == "flag_has_no_effect"]
    if spec.owner is not None and _plugin_defines(plugins, spec):
        assert warnings == []  # the provider's distribution defines and honours it
        return
    assert len(warnings) == 1
    assert warnings[0]["flag"] == spec.flag
    assert warnings[0]["reason"] == spec.no_effect
    assert spec.parse(warnings[0]["value"]) == spec.parse(value)


def _plugin_defines(plugins: Any, spec: FlagSpec) -> bool:
    host, registry = plugins
    parser = build_parser(host, registry, "run", None)
    return spec not in parser.provider_fallbacks


def test_flags_at_their_default_warn_about_nothing(plugins: Any) -> None:
    _, ns = parse(plugins, [])
    assert ns.startup_warnings == []


def test_feature_gates_with_no_effect_are_named(plugins: Any) -> None:
    options, ns = parse(plugins, ["--feature-gates=LoggingAlphaOptions=true,CSIMigration=true", "--feature-gates=AllBeta=false,LoggingBetaOptions=true"])
    assert options.feature_gates == {
        "LoggingAlphaOptions": True, "CSIMigration": True, "AllBeta": False, "LoggingBetaOptions": True,
    }  # fmt: skip
    assert [fields for event, fields in ns.startup_warnings] == [
        {
            "flag": "--feature-gates",
            "value": "CSIMigration",
            "reason": "only the LoggingAlphaOptions and LoggingBetaOptions gates (and AllAlpha, AllBeta) change something",
        }
    ]


def test_every_core_flag_is_documented_with_its_marker() -> None:
    reference = (ROOT / "docs" / "flags.md").read_text()
    for spec in all_flag_specs():
        row = next((line for line in reference.splitlines() if line.startswith(f"| `{spec.flag}` |")), None)
        assert row is not None, spec.flag
        if spec.no_effect and spec.owner is None:
            assert "**No effect**" in row, spec.flag
        elif not spec.no_effect:
            assert "**No effect**" not in row and "has no effect" not in row, spec.flag


def test_provider_flags_are_not_in_the_option_table() -> None:
    # They reach the provider through `extra`, whoever defines them.
    names = {spec.name for spec in flag_specs()}
    assert not names & {spec.name for spec in PROVIDER_FLAGS}


# ------------------------------------------------------------------ our own examples


def manifest_argv() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted([*ROOT.glob("deploy/*/*.yaml"), *ROOT.glob("docs/**/*.yaml")]):
        for doc in yaml.safe_load_all(path.read_text()):
            containers = (((doc or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers", [])
            for container in containers:
                if container.get("command", [""])[0] == "clusterscaler":
                    found.append((str(path.relative_to(ROOT)), container["command"][1:] + container.get("args", [])))
    for path in sorted(ROOT.glob("docs/**/*.md")):
        for block in re.findall(r"```(?:sh|yaml)\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line.strip().lstrip("$ ").strip()) if "clusterscaler" in line else []
                if words[:1] == ["clusterscaler"] and words[1:2] not in (["simulate"], ["explain"], ["plugins"], ["proportional"]):
                    found.append((str(path.relative_to(ROOT)), [w for w in words[1:] if w != "run"]))
    return found


MANIFESTS = manifest_argv()


def test_there_are_examples_to_check() -> None:
    assert any(name.startswith("deploy/") for name, _ in MANIFESTS)
    assert any(name.startswith("docs/") for name, _ in MANIFESTS)


@pytest.mark.parametrize(("where", "argv"), MANIFESTS, ids=[f"{w}:{i}" for i, (w, _) in enumerate(MANIFESTS)])
def test_example_command_lines_parse(plugins: Any, where: str, argv: list[str]) -> None:
    options, _ = parse(plugins, argv)
    assert options.cloud_provider in plugins[1].cloud_providers

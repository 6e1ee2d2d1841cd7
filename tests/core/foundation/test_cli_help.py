"""Help for humans: a short usage line, bools shown with an optional value, the top-level help
pointing to each command's, errors pointing to a help that lists flags, and --disable-plugins
before the command."""

from __future__ import annotations

import pytest
from clusterscaler.commands.cli import main


def help_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_usage_line_is_one_short_line(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "simulate")
    assert text.splitlines()[0] == "usage: clusterscaler simulate [options] [SCENARIO]"
    assert help_of(capsys, "run").splitlines()[0] == "usage: clusterscaler [run] [options]"


def test_bool_flags_show_the_value_as_optional(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "simulate")
    assert "--dry-run[=true|false]" in text
    assert "--dry-run bool" not in text


def test_top_level_help_points_to_each_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("run", "simulate", "explain", "plugins", "proportional"):
        assert f"clusterscaler {command} --help" in out


def test_flag_errors_point_to_a_help_that_lists_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--no-such-flag"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "(run `clusterscaler run --help` for every flag)" in err
    assert "--scale-down-unneeded-time" in help_of(capsys, "run")


@pytest.mark.parametrize("flag", [["--disable-plugins=sim"], ["--disable-plugins", "sim"]])
def test_disable_plugins_is_accepted_before_the_command(
    capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    assert main([*flag, "plugins", "--json"]) == 0
    before = capsys.readouterr().out
    assert main(["plugins", "--json", *flag]) == 0
    assert capsys.readouterr().out == before
    assert '"sim"' not in before.split('"cloudProviders"')[1].split("]")[0]


def test_run_help_opens_with_the_flags_users_set_first(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "run", "--help")
    sections = [line for line in text.splitlines() if line.endswith(":") and not line[0].isspace()]
    assert sections[:2] == ["options:", "flags most users set first:"]
    first = text.split("flags most users set first:\n", 1)[1].split("\n\n", 1)[0]
    flags = [line.split()[0].split("[")[0] for line in first.splitlines()
             if line.startswith("  --")]
    assert flags[:3] == ["--cloud-provider", "--nodes", "--node-group-auto-discovery"]
    assert "--expander" in flags
    # Provider flags sit together at the end, each provider's side by side.
    assert sections[-1] == "cloud provider flags:"
    options = text.split("options:\n", 1)[1].split("\n\n", 1)[0]
    assert "--aws-" not in options and "--gce-" not in options
    last = text.split("cloud provider flags:\n", 1)[1]
    order = [line.split()[0] for line in last.splitlines() if line.startswith("  --")]
    gce = [i for i, flag in enumerate(order) if flag.startswith("--gce-")]
    assert gce == list(range(gce[0], gce[0] + len(gce)))

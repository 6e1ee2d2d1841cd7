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

"""The logging flags drive our log output as upstream's drive klog's."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from clusterscaler.report.logs import configure_logging, configure_logging_from_options


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    yield
    configure_logging()


def logged(tmp_path: Path, *argv: str) -> tuple[str, str]:
    """What one debug, info and error line become: (the stream, the log file)."""
    host, registry = load_plugins([])
    options, _ = parse_autoscaler_args(list(argv), host, registry, warn=False)
    stream = io.StringIO()
    configure_logging_from_options(options, stream)
    log = structlog.get_logger()
    log.debug("detail_event", node="n1")
    log.info("decision_event", node_group="g1")
    log.error("failure_event", reason="boom")
    file = tmp_path / "logs" / "autoscaler.log"
    return stream.getvalue(), file.read_text() if file.exists() else ""


HEADER = re.compile(r"^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ test_logging_flags\.py:\d+\] ")


def test_v_maps_to_levels(tmp_path: Path) -> None:
    quiet, _ = logged(tmp_path, "--v=2")
    assert "decision_event" in quiet and "failure_event" in quiet
    assert "detail_event" not in quiet
    verbose, _ = logged(tmp_path, "--v=4")
    assert "detail_event" in verbose


def test_text_lines_are_klog_lines(tmp_path: Path) -> None:
    out, _ = logged(tmp_path, "--v=4")
    lines = out.splitlines()
    assert [HEADER.match(line).group(1) for line in lines] == ["I", "I", "E"]  # type: ignore[union-attr]
    assert [HEADER.sub("", line) for line in lines] == [
        '"detail_event" node="n1"',
        '"decision_event" node_group="g1"',
        '"failure_event" reason="boom"',
    ]


def test_json_lines(tmp_path: Path) -> None:
    out, _ = logged(tmp_path, "--logging-format=json", "--v=4")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [list(line) for line in lines] == [
        ["ts", "caller", "msg", "v", "node"],
        ["ts", "caller", "msg", "v", "node_group"],
        ["ts", "caller", "msg", "reason"],  # an error line has no v
    ]
    assert [(line["msg"], line.get("v")) for line in lines] == [
        ("detail_event", 4), ("decision_event", 0), ("failure_event", None),
    ]  # fmt: skip
    assert lines[1]["node_group"] == "g1"
    assert lines[1]["caller"].startswith("flags/test_logging_flags.py:")


def test_log_file_needs_logtostderr_false_as_upstream(tmp_path: Path) -> None:
    target = f"--log-file={tmp_path / 'logs' / 'autoscaler.log'}"
    out, file = logged(tmp_path, target)
    assert "decision_event" in out and file == ""
    out, file = logged(tmp_path, target, "--logtostderr=false")
    assert out == "" and "decision_event" in file and "failure_event" in file
    out, file = logged(tmp_path, target, "--logtostderr=false", "--alsologtostderr")
    assert "decision_event" in out
    assert file.count("decision_event") == 2  # appended to, as klog does


def test_skip_headers_drops_the_klog_header(tmp_path: Path) -> None:
    out, _ = logged(tmp_path, "--skip-headers")
    assert out.splitlines()[0] == '"decision_event" node_group="g1"'
    out, _ = logged(tmp_path)
    assert HEADER.match(out)


def test_add_dir_header_names_the_directory(tmp_path: Path) -> None:
    out, _ = logged(tmp_path, "--add-dir-header")
    assert re.match(r"^I\d{4} [\d:.]+ +\d+ flags/test_logging_flags\.py:\d+\] ", out)


def test_vmodule_raises_verbosity_of_matching_modules_only(tmp_path: Path) -> None:
    out, _ = logged(tmp_path, "--vmodule=test_logging_*=4")
    assert "detail_event" in out
    out, _ = logged(tmp_path, "--vmodule=scaledown*=4")
    assert "detail_event" not in out
    assert "module=" not in out  # the caller is looked up, not logged


def test_vmodule_lowers_verbosity_of_matching_modules(tmp_path: Path) -> None:
    out, _ = logged(tmp_path, "--v=4", "--vmodule=test_logging_*=0")
    assert "detail_event" not in out and "decision_event" in out


def test_backtrace_at_a_line(tmp_path: Path) -> None:
    line = next(
        number
        for number, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if 'log.info("decision_event"' in text
    )
    out, _ = logged(tmp_path, f"--log-backtrace-at=test_logging_flags.py:{line}")
    [decision] = [text for text in out.splitlines() if "decision_event" in text]
    assert "stack=" in decision and "in logged" in decision
    assert "structlog" not in decision  # the stack ends where the line was logged
    failure = next(text for text in out.splitlines() if "failure_event" in text)
    assert "stack=" not in failure


def test_split_stream_sends_info_to_stdout(tmp_path: Path, capsys: Any) -> None:
    host, registry = load_plugins([])
    options, _ = parse_autoscaler_args(
        ["--log-text-split-stream", "--feature-gates=LoggingAlphaOptions=true"], host, registry, warn=False
    )
    configure_logging_from_options(options)
    structlog.get_logger().info("decision_event")
    structlog.get_logger().warning("warning_event")
    captured = capsys.readouterr()
    assert "decision_event" in captured.out and "decision_event" not in captured.err
    assert "warning_event" in captured.err and "warning_event" not in captured.out


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--log-json-split-stream"], ["--log-json-split-stream", "LoggingAlphaOptions=true"]),
        (["--log-text-info-buffer-size=1Ki"], ["--log-text-info-buffer-size", "1024"]),
        (["--logging-format=json", "--vmodule=a=4"], ["--vmodule", "only the text format"]),
        (["--logging-format=json", "--feature-gates=LoggingBetaOptions=false"], ["--logging-format", "LoggingBetaOptions"]),
        (["--stderrthreshold=LOUD"], ["--stderrthreshold", "'LOUD'", "INFO, WARNING, ERROR or FATAL"]),
        (["--vmodule=a"], ["--vmodule", "<pattern>=<level>"]),
        (["--feature-gates=Foo"], ["--feature-gates", "<Name>=true|false"]),
        (["--log-backtrace-at=main"], ["--log-backtrace-at", "<file>:<line>"]),
    ],
    ids=["split-needs-gate", "buffer-needs-gate", "vmodule-text-only", "json-needs-beta", "severity", "vmodule-form", "gates-form", "trace-form"],
)
def test_bad_logging_values_exit_2(capsys: Any, argv: list[str], fragments: list[str]) -> None:
    host, registry = load_plugins([])
    with pytest.raises(SystemExit) as info:
        parse_autoscaler_args(argv, host, registry, warn=False)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for fragment in fragments:
        assert fragment in err

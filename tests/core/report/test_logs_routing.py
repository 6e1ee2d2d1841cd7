"""Every line has the one format: libraries' stdlib logging, `warnings`, and our events at
Cluster Autoscaler's verbosity levels."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from clusterscaler.report.logs import LogSettings, configure, configure_logging

HEADER = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [^ ]+:\d+\] ")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    yield
    configure_logging()


def json_lines(verbosity: int, emit: Any) -> list[dict[str, Any]]:
    stream = io.StringIO()
    configure(LogSettings(verbosity=verbosity, fmt="json"), stream)
    emit()
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def library_lines() -> None:
    logging.getLogger("urllib3.connectionpool").warning("Connection pool is full, discarding connection: %s", "api")
    logging.getLogger("urllib3.connectionpool").warning("Retrying (Retry(total=2)) after connection broken: /api/v1/pods")
    logging.getLogger("kubernetes.client.rest").debug("response body: %s", "{}")
    logging.getLogger("asyncio").error("Task exception was never retrieved")


def test_library_lines_are_json_lines_with_their_logger() -> None:
    lines = json_lines(0, library_lines)
    assert [(line["logger"], line["msg"], line.get("v")) for line in lines] == [
        ("urllib3.connectionpool", "Connection pool is full, discarding connection: api", 0),
        ("asyncio", "Task exception was never retrieved", None),
    ]
    assert all(line["caller"].startswith("report/test_logs_routing.py:") for line in lines)


def test_library_detail_and_retries_show_at_v9() -> None:
    lines = json_lines(9, library_lines)
    assert [(line["msg"].split(" ")[0], line.get("v")) for line in lines] == [
        ("Connection", 0), ("Retrying", 9), ("response", 9), ("Task", None),
    ]  # fmt: skip


def test_library_lines_in_text_are_klog_lines() -> None:
    stream = io.StringIO()
    configure(LogSettings(), stream)
    where = sys._getframe().f_lineno + 1
    logging.getLogger("botocore.credentials").warning("Refreshing temporary credentials failed")
    [line] = stream.getvalue().splitlines()
    assert line.startswith("W")
    assert line.endswith(
        f'test_logs_routing.py:{where}] "Refreshing temporary credentials failed" logger="botocore.credentials"'
    )


def test_warnings_are_warning_lines_from_the_code_that_warned() -> None:
    stream = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        configure(LogSettings(fmt="json"), stream)
        where = sys._getframe().f_lineno + 1
        warnings.warn("the v1beta1 API is deprecated", DeprecationWarning, stacklevel=1)
    [line] = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert (line["msg"], line["category"], line["v"]) == ("the v1beta1 API is deprecated", "DeprecationWarning", 0)
    assert line["caller"] == f"report/test_logs_routing.py:{where}"


def test_events_carry_cluster_autoscalers_verbosity() -> None:
    def emit() -> None:
        log = structlog.get_logger()
        log.info("scale_up", node_group="g1")  # "Scale-up: setting group size" (V(0))
        log.info("kube_client_configured", source="kubeconfig")  # "Using kubeconfig file" (V(1))
        log.info("event", reason="TriggeredScaleUp")  # the event sink's line (V(4))
        log.debug("estimate", node_group="g1")  # reasoning (V(4))

    assert [(line["msg"], line["v"]) for line in json_lines(0, emit)] == [("scale_up", 0)]
    assert [(line["msg"], line["v"]) for line in json_lines(1, emit)] == [("scale_up", 0), ("kube_client_configured", 1)]
    assert [(line["msg"], line["v"]) for line in json_lines(4, emit)] == [
        ("scale_up", 0), ("kube_client_configured", 1), ("event", 4), ("estimate", 4),
    ]  # fmt: skip


def test_an_exception_is_err_and_a_one_line_traceback() -> None:
    def emit() -> None:
        try:
            raise KeyError("g1")
        except KeyError:
            structlog.get_logger().exception("loop_failed")

    [line] = json_lines(0, emit)
    assert line["err"] == "KeyError: 'g1'"
    assert line["traceback"].startswith("Traceback (most recent call last):")
    assert "v" not in line


def test_uncaught_exceptions_are_one_line_each() -> None:
    program = (
        "import threading\n"
        "from clusterscaler.report.logs import configure_logging\n"
        "configure_logging(fmt='text')\n"
        "def fail():\n"
        "    raise ZeroDivisionError('division by zero')\n"
        "worker = threading.Thread(target=fail, name='worker')\n"
        "worker.start()\n"
        "worker.join()\n"
        "raise KeyError('g1')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert all(HEADER.match(line) for line in lines), done.stderr
    assert lines[0].startswith("E") and '<string>:5] "uncaught_exception_in_thread" err="ZeroDivisionError: division by zero" thread="worker"' in lines[0]
    assert lines[1].startswith("F") and '<string>:9] "uncaught_exception" err="KeyError: \'g1\'"' in lines[1]
    assert "traceback=" in lines[1]

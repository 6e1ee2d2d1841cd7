"""`clusterscaler` as a process, for end-to-end tests against the fake servers.

A provider's end-to-end test starts `clusterscaler run --cloud-provider=<name>` against the
fake Kubernetes API server and its cloud's fake, plays the controllers the cloud and the
cluster would run (kubelet registering Nodes, a Machine controller, ...) while it waits for
the scale-up and the scale-down, then stops the process as Kubernetes would, with SIGTERM:

    with ClusterscalerProcess(["--cloud-provider=gce", ...], log=tmp_path / "run.log") as run:
        run.wait_for("the scale-up from zero", lambda: gce.target_size(...) == 2, 30)
    assert run.returncode == 0, run.tail()

`clusterscaler_command()` is the command itself, for a test that runs one with
`subprocess.run` (`explain`, a bad flag).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Self


def clusterscaler_command() -> list[str]:
    """The `clusterscaler` console script next to this interpreter, or, where the
    environment has none, the CLI run by this interpreter."""
    script = Path(sys.executable).with_name("clusterscaler")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from clusterscaler.commands.cli import main; sys.exit(main())"]


class ClusterscalerProcess:
    """`clusterscaler <args>` from the with-statement until its end, its standard output and
    error written to `log` (unbuffered: the log is current while it runs), with the
    environment `env` (this process's environment when None).

    At the end of the with-statement it gets SIGTERM and `stop_timeout` seconds to exit
    (then SIGKILL); `returncode` and `output()` tell how it went."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        stop_timeout: float = 20.0,
    ) -> None:
        self.command = [*clusterscaler_command(), *args]
        self.log = log
        self.env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
        self.stop_timeout = stop_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def __enter__(self) -> Self:
        self._log_file = self.log.open("wb")
        self._process = subprocess.Popen(
            self.command, stdout=self._log_file, stderr=subprocess.STDOUT, env=self.env
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("clusterscaler is not started: use ClusterscalerProcess in a with-statement")
        return self._process

    @property
    def returncode(self) -> int | None:
        """The exit status; None while it runs."""
        return self.process.poll()

    def stop(self) -> int:
        """SIGTERM, as Kubernetes stops a pod, then SIGKILL after `stop_timeout` seconds;
        returns the exit status."""
        process = self.process
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
        return process.returncode

    def output(self) -> str:
        """What it wrote so far."""
        return self.log.read_text()

    def tail(self, chars: int = 3000) -> str:
        """The end of its output, for an assertion's message."""
        return self.output()[-chars:]

    def wait_for(
        self,
        what: str,
        condition: Callable[[], bool],
        timeout: float,
        tick: Callable[[], None] = lambda: None,
    ) -> None:
        """Until `condition()` holds, calling `tick()` (the test's controllers) between two
        checks; fails naming `what`, with the end of the output, when the process exits or
        `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(
                    f"clusterscaler exited with {self.process.returncode} while waiting for {what}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")
            tick()
            time.sleep(0.2)

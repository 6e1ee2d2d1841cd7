"""Commands run in-process reconfigure logging to the captured stderr of one test; put the
configuration back afterwards so later tests do not log into a closed stream."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)

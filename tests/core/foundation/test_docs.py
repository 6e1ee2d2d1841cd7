"""Documentation that users and plugin authors rely on stays true to the code."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from clusterscaler.commands.flagdocs import render_flags_markdown
from clusterscaler.interfaces import hookspecs

ROOT = Path(__file__).resolve().parents[3]
HOOKS = sorted(
    name
    for name, value in inspect.getmembers(hookspecs, inspect.isfunction)
    if name.startswith("clusterscaler_")
)


def test_flags_reference_is_generated_from_the_option_table() -> None:
    committed = (ROOT / "docs" / "flags.md").read_text()
    assert committed == render_flags_markdown(), (
        "docs/flags.md is stale: run `python -m clusterscaler.commands.flagdocs > docs/flags.md`"
    )


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_for_plugin_authors(hook: str) -> None:
    guide = (ROOT / "docs" / "plugins.md").read_text()
    assert f"### `{hook}(" in guide, f"docs/plugins.md has no section for {hook}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_docstring(hook: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert "Called" in doc, f"{hook} must say when it is called"


def test_there_are_hooks_to_document() -> None:
    assert len(HOOKS) >= 5

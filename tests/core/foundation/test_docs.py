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


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _python_blocks(text: str) -> list[str]:
    return [block.split("\n```", 1)[0] for block in text.split("```python\n")[1:]]


def test_the_plugin_testing_samples_are_the_example_plugins_tests() -> None:
    """docs/plugins.md's "Testing a plugin" shows test files of the example plugin exactly,
    so what a plugin author copies is what the suite runs (pytest collects docs/examples)."""
    section = _section((ROOT / "docs" / "plugins.md").read_text(), "## Testing a plugin")
    tests = ROOT / "docs" / "examples" / "clusterscaler-example-expander" / "tests"
    blocks = _python_blocks(section)
    assert len(blocks) == 2
    for block in blocks:
        named = [path for path in sorted(tests.glob("test_*.py")) if f"`tests/{path.name}`:" in section]
        assert any(block + "\n" == path.read_text() for path in named), block.splitlines()[:3]
    for block in blocks:
        imported = {
            line.split()[1].split(".")[:2][-1]
            for line in block.splitlines()
            if line.startswith(("from clusterscaler", "import clusterscaler."))
        }
        assert imported <= {"api", "testing"}, imported

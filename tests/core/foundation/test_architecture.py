"""Who may import whom (docs/architecture.md), checked on the source.

Each folder of the core has a docstring saying what it owns and what it may import; this
test holds the code to it, lazy imports inside functions included. Plugins and cloud
providers see only the public API, `clusterscaler.api`, as pytest plugins see `pytest`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "core"

# Folder of the core -> the folders it may import (itself always).
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "interfaces": {"model"},
    "framework": {"interfaces", "model"},
    "simulator": {"interfaces", "framework", "model"},
    "loop": {"interfaces", "framework", "model", "simulator"},
    "report": {"interfaces", "framework", "model", "simulator", "loop"},
    "kube": {"interfaces", "framework", "model", "report"},
    "offline": {"interfaces", "framework", "model", "simulator", "loop", "report"},
    "proportional": {"interfaces", "framework", "model", "report", "kube"},
    "api": {"interfaces", "framework", "model", "simulator", "loop", "kube"},
    # The test kit drives the commands as a user does (the differential run calls `explain`).
    "testing": {"interfaces", "framework", "model", "simulator", "loop", "report", "kube",
                "offline", "api", "commands"},
    "commands": {
        "interfaces", "framework", "model", "simulator", "loop", "report", "kube", "offline",
        "proportional", "api", "buildinfo",
    },
    "buildinfo": set(),
    "__main__": {"commands"},
    "__init__": set(),
}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under `if TYPE_CHECKING:`: annotations only, no run-time
    dependency (the registry names the kinds the loop defines this way)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        lines.add(sub.lineno)
    return lines


def imported_modules(path: Path, *, runtime_only: bool = False) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def concern(path: Path) -> str:
    relative = path.relative_to(CORE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def core_imports() -> Iterator[tuple[str, str, str]]:
    """(module path:line, its folder, the folder it imports) for every core import."""
    for path in sorted(CORE.rglob("*.py")):
        source = concern(path)
        for line, module in imported_modules(path, runtime_only=True):
            parts = module.split(".")
            if parts[0] != "clusterscaler" or len(parts) < 2 or parts[1] == "plugins":
                continue
            yield f"{path.relative_to(ROOT)}:{line}", source, parts[1]


def test_every_core_folder_is_known_and_says_what_it_may_import() -> None:
    folders = {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= ALLOWED.keys(), f"folders without import rules: {folders - ALLOWED.keys()}"
    for name in folders:
        doc = ast.get_docstring(ast.parse((CORE / name / "__init__.py").read_text()))
        assert doc, f"core/{name}/__init__.py has no docstring saying what it owns"


def test_core_folders_import_only_what_their_rules_allow() -> None:
    wrong = [
        f"{where}: {source} imports {target}"
        for where, source, target in core_imports()
        if target != source and target not in ALLOWED.get(source, set())
    ]
    assert wrong == []


def outside_imports() -> Iterator[tuple[str, str, str]]:
    """(path:line, own package prefix, imported module) for plugins and providers."""
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        for line, module in imported_modules(path):
            yield f"{path.relative_to(ROOT)}:{line}", "clusterscaler.plugins", module
    for dist in sorted((ROOT / "providers").iterdir()):
        for package in sorted(dist.glob("clusterscaler_*")):
            for path in sorted(package.rglob("*.py")):
                for line, module in imported_modules(path):
                    yield f"{path.relative_to(ROOT)}:{line}", package.name, module


def test_plugins_and_providers_use_only_the_public_api() -> None:
    wrong = [
        f"{where}: {module}"
        for where, own, module in outside_imports()
        if module.split(".")[0] == "clusterscaler"
        and module not in ("clusterscaler", "clusterscaler.api")
        and not module.startswith(own)
        # Test doubles are for tests: a provider's own testing module may use them.
        and not (module.startswith("clusterscaler.testing") and ".testing" in where.replace("/", "."))
    ]
    assert wrong == []


@pytest.mark.parametrize("name", __import__("clusterscaler.api").api.__all__)
def test_every_public_name_is_documented(name: str) -> None:
    import clusterscaler.api

    value = getattr(clusterscaler.api, name)
    if isinstance(value, (str, int, float, tuple, frozenset)):
        return  # constants: documented in the module that defines them
    assert (getattr(value, "__doc__", None) or "").strip(), f"clusterscaler.api.{name}"


def test_long_modules_say_why_at_their_top() -> None:
    """Outside `model/` and `testing/`, a module over 600 lines says why in its docstring
    ("Long on purpose: ..."): one job per module, or a reason."""
    long_without_reason = []
    for path in sorted([*CORE.rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] in (("core", "model"), ("core", "testing")):
            continue
        text = path.read_text()
        if text.count("\n") > 600:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Long on purpose" not in doc:
                long_without_reason.append(str(relative))
    assert long_without_reason == []

"""Who may import whom (docs/architecture.md), checked on the source.

Each folder of the core has a docstring saying what it owns and what it may import; this
test holds the code to it, lazy imports inside functions included. Plugins and cloud
providers see only the public API, `clusterscaler.api`, as pytest plugins see `pytest`.
"""

from __future__ import annotations

import ast
import types
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
    # The package root names the hook markers for `from clusterscaler import hookimpl`,
    # importing them from their one home when first asked for, and makes the Kubernetes
    # client's generated packages light before anything imports them.
    "__init__": {"interfaces", "kube"},
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
    """(path:line, own package prefix, imported module) for plugins, providers and the
    example plugins of the docs (their tests included)."""
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        for line, module in imported_modules(path):
            yield f"{path.relative_to(ROOT)}:{line}", "clusterscaler.plugins", module
    dists = [*sorted((ROOT / "providers").iterdir()), *sorted((ROOT / "docs" / "examples").iterdir())]
    for dist in dists:
        for package in sorted(dist.glob("clusterscaler_*")):
            for path in sorted(package.rglob("*.py")):
                for line, module in imported_modules(path):
                    yield f"{path.relative_to(ROOT)}:{line}", package.name, module
    for path in sorted((ROOT / "docs" / "examples").glob("*/tests/**/*.py")):
        package = path.relative_to(ROOT / "docs" / "examples").parts[0].replace("-", "_")
        for line, module in imported_modules(path):
            yield f"{path.relative_to(ROOT)}:{line}", package, module


def test_plugins_and_providers_use_only_the_public_api() -> None:
    wrong = [
        f"{where}: {module}"
        for where, own, module in outside_imports()
        if module.split(".")[0] == "clusterscaler"
        and module not in ("clusterscaler", "clusterscaler.api")
        and not module.startswith(own)
        # Test doubles are for tests: a provider's own testing module, and an example's
        # tests, may use them.
        and not (
            module.startswith("clusterscaler.testing")
            and (".testing" in where.replace("/", ".") or "/tests/" in where)
        )
    ]
    assert wrong == []


@pytest.mark.parametrize("name", __import__("clusterscaler.api").api.__all__)
def test_every_public_name_is_documented(name: str) -> None:
    import clusterscaler.api

    value = getattr(clusterscaler.api, name)
    if isinstance(value, (str, int, float, tuple, frozenset)):
        return  # constants: documented in the module that defines them
    if _is_type_alias(value):
        # An alias has no docstring of its own: the comment right above its definition.
        assert _alias_comment(name), f"clusterscaler.api.{name}: no comment above its alias"
        return
    assert (getattr(value, "__doc__", None) or "").strip(), f"clusterscaler.api.{name}"


def _is_type_alias(value: object) -> bool:
    if isinstance(value, type):
        return False
    return isinstance(value, (types.UnionType, types.GenericAlias)) or (
        type(value).__module__ == "typing"
    )


def _alias_comment(name: str) -> str:
    """The comment lines right above `name: TypeAlias = ...` in the core's sources."""
    for path in sorted(CORE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.startswith(f"{name}: TypeAlias"):
                above = []
                for previous in reversed(lines[:i]):
                    if not previous.startswith("#"):
                        break
                    above.append(previous)
                return "\n".join(reversed(above))
    return ""


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


# --- One home for every plugin interface -------------------------------------------------

INTERFACES = CORE / "interfaces"
# The interfaces a plugin implements or is handed: defined once, in `core/interfaces/`.
INTERFACE_KINDS = {
    "CloudProvider", "NodeGroup", "ProviderContext", "KubeApiClient", "Clock", "ClusterSource",
    "Registry", "Expander", "ExpanderContext", "Option", "Estimator", "EstimationLimiter",
    "Estimate", "PodFilter", "DrainContext", "DrainDecision", "PodListProcessor",
    "PodListContext",
}


def python_files() -> Iterator[Path]:
    """Every Python file of ours: the core, the plugins, the providers, the docs' examples
    and the tests."""
    for top in ("core", "plugins", "providers", "docs/examples", "tests", "bench"):
        yield from sorted(p for p in (ROOT / top).rglob("*.py") if ".egg-info" not in str(p))


def test_every_protocol_of_the_public_api_lives_in_interfaces() -> None:
    import clusterscaler.api

    elsewhere = [
        f"{name} ({value.__module__})"
        for name in clusterscaler.api.__all__
        if isinstance(value := getattr(clusterscaler.api, name), type)
        and getattr(value, "_is_protocol", False)
        and not value.__module__.startswith("clusterscaler.interfaces.")
    ]
    assert elsewhere == []


def test_no_interface_is_defined_outside_interfaces() -> None:
    """A second `Expander` or `NodeGroup` class in the core would make two homes."""
    found = []
    for path in sorted(CORE.rglob("*.py")):
        if path.is_relative_to(INTERFACES):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name in INTERFACE_KINDS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert found == []


def test_the_hook_markers_are_made_once_and_imported_one_way() -> None:
    """`hookspec` and `hookimpl` are made in interfaces/hookspecs.py; everyone outside the
    core, our plugins, the providers, the docs' examples and the tests, imports `hookimpl`
    from `clusterscaler.api`; inside the core (which may not import the api) it comes from
    where it is made."""
    markers = INTERFACES / "hookspecs.py"
    wrong = []
    for path in python_files():
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and path != markers:
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in ("HookimplMarker", "HookspecMarker"):
                    wrong.append(f"{where}:{node.lineno}: makes a {name}")
            if isinstance(node, ast.ImportFrom) and any(a.name == "hookimpl" for a in node.names):
                expected = (
                    "clusterscaler.interfaces.hookspecs"
                    if path.is_relative_to(CORE)
                    else "clusterscaler.api"
                )
                if node.module != expected:
                    wrong.append(f"{where}:{node.lineno}: hookimpl from {node.module}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("hookimpl", "hookspec")
                and ast.unparse(node.value) == "clusterscaler"
            ):
                wrong.append(f"{where}:{node.lineno}: clusterscaler.{node.attr}")
    assert wrong == []


def test_the_public_api_is_typed_without_any() -> None:
    """No `Any`, `Callable[..., X]` or bare `dict` in the annotations of a name
    `clusterscaler.api` exports, nor of a class of ours those annotations reach (the
    model's JSON and YAML values included: `JsonValue`, `YamlValue`)."""
    import clusterscaler.api
    from typedapi import untyped_annotations

    roots = [getattr(clusterscaler.api, name) for name in clusterscaler.api.__all__]
    found = untyped_annotations(roots)
    assert sorted(f"{where}: {what}" for _, where, what in found) == []


# --- Names that say one thing ------------------------------------------------------------

# Module names found in two folders of the core: each pair is one kind of Kubernetes object
# (or command) seen by two layers, its model and its writer or its simulation. Any other
# module name says its job once.
SHARED_MODULE_NAMES = {
    "__init__", "capacitybuffer", "capacityquota", "cli", "dra", "provreq", "workloads",
}


def test_module_names_say_their_job_once() -> None:
    folders: dict[str, list[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        folders.setdefault(path.stem, []).append(str(path.parent.relative_to(ROOT)))
    repeated = {
        name: where for name, where in folders.items()
        if len(where) > 1 and name not in SHARED_MODULE_NAMES
    }
    assert repeated == {}


def test_a_registry_is_the_plugin_registry() -> None:
    """The cluster state kept between loops is a tracker, not a registry: one word, one
    meaning."""
    registries = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}"
        for path in sorted(CORE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Registry")
    ]
    assert registries == ["core/interfaces/registry.py:" + str(_line_of_registry()) + ": Registry"]


def _line_of_registry() -> int:
    tree = ast.parse((INTERFACES / "registry.py").read_text())
    return next(n.lineno for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Registry")


def test_the_package_root_names_the_same_markers_as_the_api() -> None:
    """A plugin written as `from clusterscaler import hookimpl` registers its hooks with the
    one marker the api exports, not a second one."""
    import importlib

    import clusterscaler.api
    from clusterscaler.interfaces import hookspecs

    root = importlib.import_module("clusterscaler")
    assert root.hookimpl is clusterscaler.api.hookimpl is hookspecs.hookimpl
    assert root.hookspec is hookspecs.hookspec
    assert not hasattr(root, "hookimpls")

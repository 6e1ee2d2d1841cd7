"""The annotations a public name shows its users, read from the source, and the names of
ours they lead to: for the check that `clusterscaler.api` is typed without `Any`.

Read from the source rather than with `typing.get_type_hints`, because annotations name
types imported under `if TYPE_CHECKING:`, which do not exist at run time.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterable
from functools import cache

# Generic containers that say nothing of what they hold when not subscripted.
_BARE = {"dict", "Dict", "list", "List", "Mapping", "MutableMapping", "Sequence", "Callable"}


@cache
def _tree(module: str) -> ast.Module:
    return ast.parse(inspect.getsource(importlib.import_module(module)))


@cache
def _imported(module: str) -> dict[str, tuple[str, str]]:
    """Local name -> (module, name) of every `from X import Y`, TYPE_CHECKING ones too."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
    return names


@cache
def _aliases(module: str) -> dict[str, ast.expr]:
    """`Name: TypeAlias = ...`, and `Name = X[...]` (a type alias written without the
    annotation), at the top of the module."""
    aliases: dict[str, ast.expr] = {}
    for node in _tree(module).body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
            and "TypeAlias" in ast.unparse(node.annotation)
        ):
            aliases[node.target.id] = node.value
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Subscript)
        ):
            aliases[node.targets[0].id] = node.value
    return aliases


def _resolve(module: str, name: str) -> object:
    if name in _imported(module):
        source, attr = _imported(module)[name]
        try:
            return getattr(importlib.import_module(source), attr)
        except (ImportError, AttributeError):
            return None
    return getattr(importlib.import_module(module), name, None)


def _ours(value: object) -> bool:
    return (inspect.isclass(value) or inspect.isfunction(value)) and str(
        getattr(value, "__module__", "")
    ).startswith("clusterscaler")


def _expression(annotation: ast.expr) -> ast.expr:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return ast.parse(annotation.value, mode="eval").body
    return annotation


def _alias(module: str, name: str) -> tuple[str, ast.expr] | None:
    """The module and value of the type alias `name` means in `module`: its own, or one
    of ours it imports (`JsonObject` from the model's `common`)."""
    if name in _aliases(module):
        return module, _aliases(module)[name]
    source, attr = _imported(module).get(name, ("", ""))
    if source.startswith("clusterscaler") and attr in _aliases(source):
        return source, _aliases(source)[attr]
    return None


def _problems(
    annotation: ast.expr,
    module: str,
    reached: list[object],
    expanding: frozenset[tuple[str, str]] = frozenset(),
) -> list[str]:
    """`expanding`: the aliases being read, so that a recursive alias (`JsonValue`, whose
    lists hold `JsonValue`s) is read once."""
    expression = _expression(annotation)
    subscripted = {id(n.value) for n in ast.walk(expression) if isinstance(n, ast.Subscript)}
    found: list[str] = []
    for node in ast.walk(expression):
        if node is not expression and isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += _problems(node, module, reached, expanding)
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name == "Any":
                found.append("Any")
            elif name in _BARE and id(node) not in subscripted:
                found.append(f"bare {name}")
            elif isinstance(node, ast.Name) and (alias := _alias(module, name)) is not None:
                source, value = alias
                if (source, name) not in expanding:
                    found += _problems(value, source, reached, expanding | {(source, name)})
            elif isinstance(node, ast.Name) and _ours(target := _resolve(module, name)):
                reached.append(target)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Callable"):
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) else None
            if isinstance(first, ast.Constant) and first.value is Ellipsis:
                found.append("Callable[..., ...]")
    return found


def _definition(value: object) -> ast.ClassDef | ast.FunctionDef | None:
    body: list[ast.stmt] = _tree(str(getattr(value, "__module__", ""))).body
    node: ast.ClassDef | ast.FunctionDef | None = None
    for part in str(getattr(value, "__qualname__", "")).split("."):
        node = next(
            (n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part),
            None,
        )
        if node is None:
            return None
        body = node.body
    return node


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__init__"


def _signature(function: ast.FunctionDef) -> list[tuple[str, ast.expr]]:
    arguments = function.args
    annotated = [
        (f"({argument.arg})", argument.annotation)
        for argument in (
            *arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
            arguments.vararg, arguments.kwarg,
        )
        if argument is not None and argument.annotation is not None
    ]
    if function.returns is not None:
        annotated.append((" -> ", function.returns))
    return annotated


def untyped_annotations(roots: Iterable[object]) -> list[tuple[str, str, str]]:
    """(owner, where, what) for every `Any`, `Callable[..., X]` or bare container in the
    public annotations of `roots` and of the classes and functions of ours they reach
    (fields, public methods, their bases); `owner` is the class or function's full name."""
    queue = [value for value in roots if _ours(value)]
    seen: set[int] = set()
    found: list[tuple[str, str, str]] = []
    while queue:
        value = queue.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        node = _definition(value)
        if node is None:
            continue
        module = str(getattr(value, "__module__", ""))
        owner = f"{module}.{getattr(value, '__qualname__', '')}"
        annotated: list[tuple[str, ast.expr]] = []
        if isinstance(node, ast.FunctionDef):
            annotated = _signature(node)
        else:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    if _public(item.target.id):
                        annotated.append((f".{item.target.id}", item.annotation))
                elif isinstance(item, ast.FunctionDef) and _public(item.name):
                    annotated += [(f".{item.name}{where}", a) for where, a in _signature(item)]
            queue += [base for base in getattr(value, "__mro__", ())[1:] if _ours(base)]
        for where, annotation in annotated:
            reached: list[object] = []
            found += [(owner, f"{owner}{where}", what) for what in _problems(annotation, module, reached)]
            queue += reached
    return found

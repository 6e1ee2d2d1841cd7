"""The official Kubernetes client, its generated classes imported when first used.

`import kubernetes` runs the package's `__init__`, which imports the client package, whose
generated `__init__` imports every API class (about 60 modules) and every model (over 750),
as does `kubernetes.client.api_client` through `import kubernetes.client.models`: about 30
MiB of classes in a process that uses a handful of APIs and reads answers as JSON
(`_preload_content=False`). That is a quarter of the autoscaler's resident memory on a
1,000-node cluster.

`install()` puts light modules in the place of four packages before the client is first
imported: `kubernetes`, `kubernetes.client`, `kubernetes.client.api` and
`kubernetes.client.models`. Each is the real package (its path, so its submodules import
as usual), without its `__init__` run: a name the `__init__` would have imported is
imported when first asked for, from the module the `__init__` names for it (read from the
`__init__`'s own `from M import N` lines, the first time a name is asked for). A
`kubernetes.client.V1Pod` is the very class the eager import gives; `getattr(models,
name)`, as the client's deserializer does, imports one model. An `__init__` holding
anything else than such imports, its docstring and constant assignments is run whole
instead, as a plain import would: a client release that changes its layout costs memory,
never a name.

Nothing happens when the client was imported already, or is not installed.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import importlib.util
import sys
import threading
import types
from pathlib import Path

# The packages made light, parents first (a child is set as its parent's attribute).
LIGHT_PACKAGES = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.api",
    "kubernetes.client.models",
)


def install() -> None:
    """Make the client's packages light (see the module's docstring), once per process."""
    if "kubernetes" in sys.modules:
        return
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or not spec.submodule_search_locations:
        return
    root = Path(next(iter(spec.submodule_search_locations)))
    made: list[types.ModuleType] = []
    for name in LIGHT_PACKAGES:
        directory = root.joinpath(*name.split(".")[1:])
        init = directory / "__init__.py"
        if not init.is_file():
            break
        made.append(light_package(name, init))
    for module in made:
        sys.modules[module.__name__] = module
        parent, _, child = module.__name__.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def light_package(name: str, init: Path) -> types.ModuleType:
    """Package `name` whose `__init__` is the file `init`, that file not run: its names
    imported when first asked for (see the module's docstring)."""
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(init.parent)]
    )
    assert spec is not None and spec.loader is not None
    module = types.ModuleType(name)
    module.__spec__ = spec
    module.__file__ = str(init)
    module.__path__ = [str(init.parent)]
    module.__package__ = name
    module.__loader__ = spec.loader
    state = _Names(module, init)
    module.__getattr__ = state.resolve  # type: ignore[method-assign]
    module.__dir__ = state.names  # type: ignore[method-assign]
    return module


class _Names:
    """What a light package's `__init__` would have bound, read from it when first asked."""

    def __init__(self, module: types.ModuleType, init: Path) -> None:
        self.module = module
        self.init = init
        self.lock = threading.RLock()
        # name -> the module it is imported from ("" for the package's own submodule);
        # None until the `__init__` is read.
        self.sources: dict[str, str] | None = None

    def _read(self) -> dict[str, str]:
        with self.lock:
            if self.sources is None:
                read = imports_of(self.init.read_text(encoding="utf-8"), self.module.__name__)
                if read is None:
                    self.sources = {}
                    self._run_whole()
                else:
                    constants, self.sources = read
                    for key, value in constants.items():
                        self.module.__dict__.setdefault(key, value)
            return self.sources

    def _run_whole(self) -> None:
        """The `__init__` as a plain import runs it, in the package's namespace."""
        code = compile(self.init.read_text(encoding="utf-8"), str(self.init), "exec")
        exec(code, self.module.__dict__)

    def resolve(self, attr: str) -> object:
        """`module.attr`, imported now from where the `__init__` imports it, or the
        package's submodule `attr` (as `from package import submodule` finds it)."""
        sources = self._read()
        if attr in self.module.__dict__:
            # A constant of the `__init__` (`__version__`), bound by reading it.
            return self.module.__dict__[attr]
        if attr.startswith("__"):
            raise AttributeError(f"module {self.module.__name__!r} has no attribute {attr!r}")
        source = sources.get(attr)
        if source:
            value = getattr(importlib.import_module(source), attr)
        else:
            name = f"{self.module.__name__}.{attr}"
            if importlib.util.find_spec(name) is None:
                raise AttributeError(
                    f"module {self.module.__name__!r} has no attribute {attr!r}"
                )
            value = importlib.import_module(name)
        setattr(self.module, attr, value)
        return value

    def names(self) -> list[str]:
        sources = self._read()  # first: reading binds the constants
        return sorted({*self.module.__dict__, *sources})


def imports_of(source: str, package: str) -> tuple[dict[str, object], dict[str, str]] | None:
    """The constants and the imported names (name -> module; "" for a submodule of
    `package`, `from . import sub`) of the `__init__` of `package`, made of `from M import
    N` lines, a docstring, `from __future__` and assignments of constants; None when it
    holds anything else."""
    constants: dict[str, object] = {}
    sources: dict[str, str] = {}
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.ImportFrom):
            if statement.module == "__future__":
                # Binds the feature's name, as the eager import does.
                for alias in statement.names:
                    constants[alias.asname or alias.name] = getattr(__future__, alias.name)
                continue
            if statement.level > 1:
                return None
            if statement.level == 1 and not statement.module:
                # `from . import sub`: the package's own submodules ("" for them).
                for alias in statement.names:
                    sources[alias.asname or alias.name] = ""
                continue
            module = (
                f"{package}.{statement.module}" if statement.level else statement.module
            )
            if not module:
                return None
            for alias in statement.names:
                if alias.name == "*":
                    return None
                sources[alias.asname or alias.name] = module
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        elif (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Constant)
            and all(isinstance(t, ast.Name) for t in statement.targets)
        ):
            for target in statement.targets:
                assert isinstance(target, ast.Name)
                constants[target.id] = statement.value.value
        else:
            return None
    return constants, sources

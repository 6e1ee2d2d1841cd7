"""A renderer for the subset of Helm's Go templates that deploy/helm/clusterscaler uses.

CI has no `helm` binary, so the chart's tests render it with this. The subset: text and
`{{ }}` actions with `-` whitespace trimming and `/* */` comments; `if`/`else if`/`else`,
`range` (over lists and maps, with `$k, $v :=`), `with`, `define` and `include`, variables
(`$x := ...`, `$` the root); pipelines with `|` and parentheses; fields of maps
(`.Values.a.b`, `$v.name`); and the functions in FUNCTIONS, which behave as in Helm. Anything
else raises TemplateError naming the file and the action, so a template that leaves the
subset fails its test instead of rendering wrongly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class TemplateError(Exception):
    pass


# ------------------------------------------------------------------------------ parsing

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)


@dataclass
class Text:
    text: str


@dataclass
class Output:
    pipe: str


@dataclass
class Assign:
    name: str
    pipe: str


@dataclass
class Block:
    kind: str  # if, range, with, define
    arg: str
    body: list[Any] = field(default_factory=list)
    orelse: list[Any] = field(default_factory=list)


def _lex(source: str) -> list[tuple[str, str]]:
    """(kind, content) pairs: ("text", ...) and ("action", ...), trimming applied."""
    items: list[tuple[str, str]] = []
    pos = 0
    trim_next = False
    for m in _ACTION.finditer(source):
        text = source[pos : m.start()]
        if trim_next:
            text = text.lstrip()
        if m.group(1):
            text = text.rstrip()
        if text:
            items.append(("text", text))
        body = m.group(2).strip()
        if not (body.startswith("/*") and body.endswith("*/")):
            items.append(("action", body))
        trim_next = bool(m.group(3))
        pos = m.end()
    text = source[pos:]
    if trim_next:
        text = text.lstrip()
    if text:
        items.append(("text", text))
    return items


def parse(source: str, name: str) -> tuple[list[Any], dict[str, list[Any]]]:
    """The top-level nodes and the templates the source defines."""
    defines: dict[str, list[Any]] = {}
    root: list[Any] = []
    stack: list[tuple[Block | None, list[Any]]] = [(None, root)]

    def current() -> list[Any]:
        return stack[-1][1]

    for kind, content in _lex(source):
        if kind == "text":
            current().append(Text(content))
            continue
        word, _, rest = content.partition(" ")
        rest = rest.strip()
        if word in ("if", "range", "with", "define"):
            block = Block(word, rest)
            current().append(block)
            stack.append((block, block.body))
        elif word == "else":
            block = stack[-1][0]
            if block is None or block.kind == "define":
                raise TemplateError(f"{name}: else outside if/range/with")
            if rest.startswith("if "):
                inner = Block("if", rest[3:].strip())
                block.orelse.append(inner)
                # `else if` shares the outer block's `end`.
                stack[-1] = (inner, inner.body)
                continue
            if rest:
                raise TemplateError(f"{name}: unsupported {{{{ {content} }}}}")
            stack[-1] = (block, block.orelse)
        elif word == "end":
            if len(stack) == 1:
                raise TemplateError(f"{name}: end without a block")
            block = stack.pop()[0]
            assert block is not None
            if block.kind == "define":
                root.remove(block)
                defines[_string_literal(block.arg, name)] = block.body
        elif re.match(r"^\$\w*\s*:=", content):
            var, _, pipe = content.partition(":=")
            current().append(Assign(var.strip(), pipe.strip()))
        elif word in ("template", "block", "break", "continue") or re.match(r"^\$\w*\s*=", content):
            raise TemplateError(f"{name}: unsupported {{{{ {content} }}}}")
        else:
            current().append(Output(content))
    if len(stack) != 1:
        raise TemplateError(f"{name}: {stack[-1][0].kind if stack[-1][0] else '?'} without end")
    return root, defines


def _string_literal(token: str, name: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return str(json.loads(token))
    raise TemplateError(f"{name}: expected a quoted name, got {token!r}")


_TOKEN = re.compile(
    r"""\s*(?:
    (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<pipe>\|)
  | (?P<var>\$\w*(?:\.\w+)*)
  | (?P<field>(?:\.\w+)+|\.)
  | (?P<ident>[A-Za-z_]\w*)
    )""",
    re.VERBOSE,
)


def _tokens(pipe: str, name: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(pipe):
        if pipe[pos:].strip() == "":
            break
        m = _TOKEN.match(pipe, pos)
        if not m or m.end() == pos:
            raise TemplateError(f"{name}: cannot read {pipe[pos:]!r} in {{{{ {pipe} }}}}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


# ------------------------------------------------------------------------------ values


def truthy(value: Any) -> bool:
    """Go templates' truth: false, 0, nil and empty strings, lists and maps are false."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float, str, list, tuple, dict)):
        return bool(value)
    return True


def to_text(value: Any) -> str:
    """How `{{ value }}` prints: Helm prints a missing value as nothing."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        raise TemplateError(f"printing a {type(value).__name__} needs toYaml: {value!r}")
    return str(value)


def to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")


def _indent(width: Any, text: Any) -> str:
    pad = " " * int(width)
    return pad + to_text(text).replace("\n", "\n" + pad)


def _default(fallback: Any, value: Any = None) -> Any:
    return value if truthy(value) else fallback


def _quote(*values: Any) -> str:
    return " ".join(json.dumps(to_text(v)) for v in values if v is not None)


def _index(collection: Any, *keys: Any) -> Any:
    for key in keys:
        if collection is None:
            return None
        if isinstance(collection, Mapping):
            collection = collection.get(key)
        else:
            collection = collection[int(key)]
    return collection


def _eq(a: Any, *others: Any) -> bool:
    return any(a == b for b in others)


def _and(*values: Any) -> Any:
    for v in values:
        if not truthy(v):
            return v
    return values[-1]


def _or(*values: Any) -> Any:
    for v in values:
        if truthy(v):
            return v
    return values[-1]


def _printf(fmt: str, *args: Any) -> str:
    return re.sub(r"%[sdv]", "{}", fmt).format(*(to_text(a) for a in args))


def _trunc(n: Any, s: Any) -> str:
    return to_text(s)[: int(n)]


def _kind_is(kind: str, value: Any) -> bool:
    kinds = {"map": dict, "slice": list, "string": str, "bool": bool}
    if kind not in kinds:
        raise TemplateError(f"kindIs {kind!r}: expected one of {sorted(kinds)}")
    return isinstance(value, kinds[kind])


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "default": _default,
    "quote": _quote,
    "toYaml": to_yaml,
    "indent": _indent,
    "nindent": lambda w, t: "\n" + _indent(w, t),
    "index": _index,
    "eq": _eq,
    "ne": lambda a, b: a != b,
    "and": _and,
    "or": _or,
    "not": lambda v: not truthy(v),
    "printf": _printf,
    "trunc": _trunc,
    "trimSuffix": lambda suffix, s: to_text(s).removesuffix(suffix),
    "contains": lambda sub, s: sub in to_text(s),
    "replace": lambda old, new, s: to_text(s).replace(old, new),
    "join": lambda sep, items: sep.join(to_text(i) for i in items or []),
    "kindIs": _kind_is,
    "empty": lambda v: not truthy(v),
    "hasKey": lambda m, k: isinstance(m, Mapping) and k in m,
    "toString": to_text,
}


# ------------------------------------------------------------------------------ rendering


@dataclass
class Chart:
    """A chart directory: Chart.yaml, values.yaml and templates/."""

    path: Path
    defines: dict[str, list[Any]] = field(default_factory=dict)
    templates: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for file in sorted((self.path / "templates").iterdir()):
            if file.suffix not in (".yaml", ".tpl"):
                continue
            nodes, defines = parse(file.read_text(), file.name)
            self.defines.update(defines)
            if not file.name.startswith("_"):
                self.templates[file.name] = nodes

    def default_values(self) -> dict[str, Any]:
        return dict(yaml.safe_load((self.path / "values.yaml").read_text()) or {})

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = "clusterscaler",
        namespace: str = "kube-system",
        service: str = "Helm",
    ) -> dict[str, str]:
        """Each template's output, with `values` merged over values.yaml as `--set` would."""
        merged = _merge(self.default_values(), dict(values or {}))
        meta = yaml.safe_load((self.path / "Chart.yaml").read_text())
        root = {
            "Values": merged,
            "Release": {"Name": release, "Namespace": namespace, "Service": service},
            "Chart": {
                "Name": meta["name"],
                "Version": meta["version"],
                "AppVersion": meta["appVersion"],
            },
        }
        return {
            name: _Renderer(self, name).run(nodes, root) for name, nodes in self.templates.items()
        }

    def manifests(self, values: Mapping[str, Any] | None = None, **kw: Any) -> list[dict[str, Any]]:
        """Every object of the rendered chart, parsed."""
        docs: list[dict[str, Any]] = []
        for name, text in self.render(values, **kw).items():
            try:
                docs += [d for d in yaml.safe_load_all(text) if d]
            except yaml.YAMLError as e:
                raise TemplateError(f"{name} renders invalid YAML: {e}\n{text}") from e
        return docs


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)  # Helm: a null deletes the default
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


class _Renderer:
    def __init__(self, chart: Chart, name: str) -> None:
        self.chart = chart
        self.name = name

    def run(self, nodes: list[Any], dot: Any) -> str:
        return self._nodes(nodes, dot, [{"$": dot}])

    def _nodes(self, nodes: list[Any], dot: Any, scopes: list[dict[str, Any]]) -> str:
        scopes = [*scopes, {}]
        out: list[str] = []
        for node in nodes:
            if isinstance(node, Text):
                out.append(node.text)
            elif isinstance(node, Output):
                out.append(to_text(self._pipe(node.pipe, dot, scopes)))
            elif isinstance(node, Assign):
                scopes[-1][node.name] = self._pipe(node.pipe, dot, scopes)
            else:
                out.append(self._block(node, dot, scopes))
        return "".join(out)

    def _block(self, block: Block, dot: Any, scopes: list[dict[str, Any]]) -> str:
        if block.kind == "if":
            chosen = block.body if truthy(self._pipe(block.arg, dot, scopes)) else block.orelse
            return self._nodes(chosen, dot, scopes)
        if block.kind == "with":
            value = self._pipe(block.arg, dot, scopes)
            if truthy(value):
                return self._nodes(block.body, value, scopes)
            return self._nodes(block.orelse, dot, scopes)
        if block.kind == "range":
            names: list[str] = []
            arg = block.arg
            if ":=" in arg:
                decl, _, arg = arg.partition(":=")
                names = [n.strip() for n in decl.split(",")]
            value = self._pipe(arg.strip(), dot, scopes)
            if isinstance(value, Mapping):
                pairs = [(k, value[k]) for k in sorted(value)]
            elif isinstance(value, (list, tuple)):
                pairs = list(enumerate(value))
            elif value is None:
                pairs = []
            else:
                raise TemplateError(f"{self.name}: range over {value!r}")
            if not pairs:
                return self._nodes(block.orelse, dot, scopes)
            out = []
            for key, item in pairs:
                bound: dict[str, Any] = {}
                if len(names) == 1:
                    bound[names[0]] = item
                elif len(names) == 2:
                    bound[names[0]], bound[names[1]] = key, item
                out.append(self._nodes(block.body, item, [*scopes, bound]))
            return "".join(out)
        raise TemplateError(f"{self.name}: unexpected {block.kind}")

    def _pipe(self, pipe: str, dot: Any, scopes: list[dict[str, Any]]) -> Any:
        tokens = _tokens(pipe, self.name)
        value, rest = self._pipeline(tokens, dot, scopes)
        if rest:
            raise TemplateError(f"{self.name}: unexpected {rest[0][1]!r} in {{{{ {pipe} }}}}")
        return value

    def _pipeline(
        self, tokens: list[tuple[str, str]], dot: Any, scopes: list[dict[str, Any]]
    ) -> tuple[Any, list[tuple[str, str]]]:
        value: Any = None
        piped = False
        while True:
            args: list[Any] = []
            func: str | None = None
            while tokens and tokens[0][0] not in ("pipe", "rparen"):
                kind, text = tokens.pop(0)
                if (
                    kind == "ident"
                    and func is None
                    and not args
                    and text not in ("true", "false", "nil")
                ):
                    func = text
                elif kind == "lparen":
                    sub, tokens = self._pipeline(tokens, dot, scopes)
                    if not tokens or tokens[0][0] != "rparen":
                        raise TemplateError(f"{self.name}: unclosed (")
                    tokens = tokens[1:]
                    args.append(sub)
                else:
                    args.append(self._operand(kind, text, dot, scopes))
            if piped:
                args.append(value)
            if func is not None:
                value = self._call(func, args, dot)
            elif len(args) == 1:
                value = args[0]
            else:
                raise TemplateError(f"{self.name}: {len(args)} operands without a function")
            if tokens and tokens[0][0] == "pipe":
                tokens = tokens[1:]
                piped = True
                continue
            return value, tokens

    def _operand(self, kind: str, text: str, dot: Any, scopes: list[dict[str, Any]]) -> Any:
        if kind == "str":
            return json.loads(text)
        if kind == "raw":
            return text[1:-1]
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "ident":
            return {"true": True, "false": False, "nil": None}[text]
        if kind == "field":
            return self._fields(dot, text.split(".")[1:] if text != "." else [], text)
        if kind == "var":
            name, *path = text.split(".")
            for scope in reversed(scopes):
                if name in scope:
                    return self._fields(scope[name], path, text)
            raise TemplateError(f"{self.name}: undefined variable {name}")
        raise TemplateError(f"{self.name}: unexpected {text!r}")

    def _fields(self, value: Any, path: list[str], text: str) -> Any:
        for i, key in enumerate(path):
            if value is None:
                # Go stops here: "nil pointer evaluating interface {}.key".
                raise TemplateError(
                    f"{self.name}: {text}: nil pointer evaluating .{'.'.join(path[i:])}"
                )
            if not isinstance(value, Mapping):
                raise TemplateError(f"{self.name}: {text}: can't evaluate field {key} in {value!r}")
            value = value.get(key)
        return value

    def _call(self, func: str, args: list[Any], dot: Any) -> Any:
        if func == "include":
            name, ctx = args
            if name not in self.chart.defines:
                raise TemplateError(f"{self.name}: include of undefined template {name!r}")
            return self.run(self.chart.defines[name], ctx)
        if func == "tpl":
            text, ctx = args
            nodes, _ = parse(to_text(text), f"{self.name} (tpl)")
            return self.run(nodes, ctx)
        if func not in FUNCTIONS:
            raise TemplateError(f"{self.name}: unsupported function {func!r}")
        try:
            return FUNCTIONS[func](*args)
        except TypeError as e:
            raise TemplateError(f"{self.name}: {func}: {e}") from e

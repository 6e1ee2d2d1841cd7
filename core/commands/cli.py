"""The `clusterscaler` command line.

Two phases: plugins are loaded first, then the parser is built, so `--cloud-provider`,
`--expander` and `--estimator` accept exactly the names installed plugins registered, and
plugin flags (`clusterscaler_add_options`) appear in `--help`.

Commands: `run` (the autoscaler; the default when no command is given), `simulate`,
`explain`, `plugins`, `proportional`. A bad flag value exits with status 2 and names the
flag, the value and the expected form.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import structlog
from clusterscaler.framework.options import (
    BOOL,
    PROVIDER_FLAGS,
    REPEATABLE,
    UNSET,
    AutoscalingOptions,
    FlagSpec,
    OptionError,
    adjust,
    flag_specs,
    format_value,
    ineffective_feature_gates,
    ineffective_values,
    options_from_namespace,
    validate,
    validate_names,
)
from clusterscaler.framework.pluginmanager import (
    PluginHost,
    build_plugin_manager,
    collect_registry,
    describe,
    hook_names,
)
from clusterscaler.framework.schedulerconfig import SchedulerConfigError, load_scheduler_config
from clusterscaler.interfaces.registry import PluginError, Registry
from clusterscaler.report.logs import configure_logging_from_options

USAGE_ERROR = 2
RUNTIME_ERROR = 1
DISABLE_FLAG = "--disable-plugins"

log = structlog.get_logger()


@dataclass
class CommandContext:
    """What a command's `run` receives."""

    host: PluginHost
    registry: Registry
    options: AutoscalingOptions
    args: argparse.Namespace
    # The process ends when the command returns (`main` called with the process's own
    # arguments, not in-process by a test or a tool): what the command builds lives until
    # then, so the command may hold the cyclic collector off (`gc.disable()`) for the rest
    # of the process instead of tracing it; `main` freezes what is left and re-enables it.
    exits: bool = False


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, ctx: CommandContext) -> int: ...


# Commands that share the autoscaler's flags, by the module that implements them.
AUTOSCALER_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("clusterscaler.commands.run", "Run the autoscaler against a Kubernetes cluster (the default)."),
    "simulate": (
        "clusterscaler.commands.simulate",
        "Run the real loop against a simulated cluster on a virtual clock.",
    ),
    "explain": (
        "clusterscaler.commands.explain",
        "Explain, per pending pod and per node, what the autoscaler would do and why.",
    ),
}
OTHER_COMMANDS = {
    "plugins": "List installed plugin distributions and what they register.",
    "proportional": "The cluster-proportional-autoscaler (scales a workload with cluster size).",
}
# Commands that read their input, answer and end (`run` and `proportional` serve until
# stopped).
ONE_SHOT_COMMANDS = ("simulate", "explain", "plugins")


class _Parser(argparse.ArgumentParser):
    """argparse with Go-flag conventions: no abbreviations, exit status 2 on bad input."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # The cloud-provider flags that no installed distribution defines (see
        # `add_provider_fallbacks`).
        self.provider_fallbacks: list[FlagSpec] = []

    def error(self, message: str) -> NoReturn:
        # The full usage of ~130 flags would bury the one line that matters. `run`'s prog is
        # the bare `clusterscaler`, whose --help lists the commands: point at `run --help`.
        command = "clusterscaler run" if self.prog == "clusterscaler" else self.prog
        self.exit(
            USAGE_ERROR,
            f"{self.prog}: error: {message}\n(run `{command} --help` for every flag)\n",
        )


class _HelpFormatter(argparse.HelpFormatter):
    """Bool flags read as Go's: `--dry-run[=true|false]`, the value optional (`--dry-run` is true)."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if action.option_strings and action.metavar == BOOL:
            return ", ".join(f"{option}[=true|false]" for option in action.option_strings)
        return super()._format_action_invocation(action)


def _short_usage(parser: argparse.ArgumentParser, prog: str) -> str:
    """`clusterscaler simulate [options] [SCENARIO]`: the positionals, not ~130 flags."""
    words = [prog, "[options]"]
    for action in parser._actions:
        if action.option_strings:
            continue
        name = str(action.metavar or action.dest).upper()
        words.append(f"[{name}]" if action.nargs in ("?", "*") else name)
    return " ".join(words)


def _type_for(spec: FlagSpec) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return spec.parse(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(
                f"invalid value {text!r}: expected {exc.expected}"
            ) from None

    return convert


def add_autoscaler_flags(parser: argparse.ArgumentParser, registry: Registry) -> None:
    """Add every flag of the option table to `parser`, grouped as in `docs/flags.md`."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    choices = {
        "cloud_provider": sorted(registry.cloud_providers),
        "expander": sorted(registry.expanders),
        "estimator": sorted(registry.estimators),
    }
    for spec in flag_specs():
        group = groups.get(spec.group)
        if group is None:
            group = groups[spec.group] = parser.add_argument_group(f"{spec.group} flags")
        help_text = _help_text(spec)
        if spec.dest in choices:
            help_text = f"Installed: {', '.join(choices[spec.dest]) or 'none'}. {help_text}"
        names = [spec.flag]
        if spec.name == "v":
            names.append("-v")
        kwargs: dict[str, Any] = {"dest": spec.dest, "default": UNSET, "help": help_text}
        if spec.kind in REPEATABLE:
            kwargs["action"] = "append"
            kwargs["default"] = None  # argparse appends to the default; None means unset
        kwargs["type"] = _type_for(spec)
        kwargs["metavar"] = spec.kind
        group.add_argument(*names, **kwargs)
    parser.add_argument(
        DISABLE_FLAG,
        dest="disable_plugins",
        default="",
        metavar="names",
        help="Comma-separated entry-point names of plugins not to load (also "
        "CLUSTERSCALER_DISABLE_PLUGINS).",
    )


def _help_text(spec: FlagSpec) -> str:
    text = spec.help.replace("%", "%%")
    if spec.no_effect:
        text += f" No effect: {spec.no_effect}."
    return text + f" (default {format_value(spec.kind, spec.default)})"


def add_provider_fallbacks(parser: argparse.ArgumentParser) -> list[FlagSpec]:
    """Define the upstream cloud-provider flags no installed distribution defined; return them.

    Their values go to `AutoscalingOptions.extra` under their dest, as a plugin's would.
    """
    added = []
    group = parser.add_argument_group("cloud provider flags")
    for spec in PROVIDER_FLAGS:
        if spec.flag in parser._option_string_actions:
            continue
        group.add_argument(
            spec.flag,
            dest=spec.dest,
            default=spec.default,
            type=_type_for(spec),
            metavar=spec.kind,
            help=_help_text(spec),
        )
        added.append(spec)
    return added


def normalize_flag_names(argv: Sequence[str]) -> list[str]:
    """Accept underscores wherever a dash is, as upstream does (`--log_dir` is `--log-dir`),
    and Go's `-v=4` for `--v=4`."""
    out: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            out.extend(argv[i:])
            break
        if token.startswith("-v=") or token == "-v":
            token = "-" + token
        if token.startswith("--") and len(token) > 2:
            name, sep, value = token.partition("=")
            token = name.replace("_", "-") + sep + value
        out.append(token)
    return out


def normalize_bool_flags(argv: Sequence[str], bool_flags: set[str]) -> list[str]:
    """Turn Go-style boolean flags into `--flag=value` form.

    `--flag` alone means true; `--flag true|false` (space form) is accepted too.
    """
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            out.extend(argv[i:])
            break
        if token in bool_flags:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is not None and nxt.lower() in ("true", "false"):
                out.append(f"{token}={nxt}")
                i += 2
                continue
            out.append(f"{token}=true")
        else:
            out.append(token)
        i += 1
    return out


def _split_disable(argv: Sequence[str]) -> str:
    """Read `--disable-plugins` before plugins are loaded (the parser needs them loaded)."""
    values = []
    for i, token in enumerate(argv):
        if token == "--":
            break
        if token.startswith(DISABLE_FLAG + "="):
            values.append(token.split("=", 1)[1])
        elif token == DISABLE_FLAG and i + 1 < len(argv):
            values.append(argv[i + 1])
    return ",".join(values)


def load_plugins(argv: Sequence[str]) -> tuple[PluginHost, Registry]:
    host = build_plugin_manager(disabled=_split_disable(argv))
    return host, collect_registry(host)


class _VersionAction(argparse.Action):
    """`--version`: asks for the commit only when the flag is given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from clusterscaler.buildinfo import version_text

        print(version_text())
        parser.exit()


def build_parser(
    host: PluginHost, registry: Registry, command: str, module: CommandModule | None
) -> _Parser:
    prog = "clusterscaler" if command == "run" else f"clusterscaler {command}"
    parser = _Parser(
        prog=prog,
        description=AUTOSCALER_COMMANDS[command][1],
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show the version, the commit and the upstream release tracked")
    if module is not None:
        module.add_arguments(parser)
    add_autoscaler_flags(parser, registry)
    before = list(parser._optionals._group_actions)
    host.hook.clusterscaler_add_options(parser=parser)
    from_plugins = [a for a in parser._optionals._group_actions if a not in before]
    parser.provider_fallbacks = add_provider_fallbacks(parser)
    _order_help(parser, from_plugins)
    parser.usage = _short_usage(parser, "clusterscaler [run]" if command == "run" else prog)
    return parser


# The flags `--help` shows first: the ones a user sets before any other.
FIRST_FLAGS = (
    "--cloud-provider", "--nodes", "--node-group-auto-discovery", "--cloud-config",
    "--expander", "--balance-similar-node-groups", "--scale-down-enabled",
    "--max-nodes-total", "--kubeconfig", "--dry-run",
)


def _order_help(parser: argparse.ArgumentParser, from_plugins: list[argparse.Action]) -> None:
    """`--help` opens with FIRST_FLAGS; the flags providers add (the installed ones' and the
    fallbacks of those not installed) sit together, ordered by provider, at the end."""
    groups = parser._action_groups
    first = parser.add_argument_group("flags most users set first")
    for flag in FIRST_FLAGS:
        action = parser._option_string_actions.get(flag)
        if action is None:
            continue
        for group in groups:
            if group is not first and action in group._group_actions:
                group._group_actions.remove(action)
        first._group_actions.append(action)
    groups.remove(first)
    groups.insert(2, first)  # after the positionals and -h/--version
    providers = next(g for g in groups if g.title == "cloud provider flags")
    for action in from_plugins:
        parser._optionals._group_actions.remove(action)
    providers._group_actions[:0] = from_plugins
    providers._group_actions.sort(key=lambda a: (_provider_of(a), a.option_strings[0]))
    groups.remove(providers)
    groups.append(providers)


def _provider_of(action: argparse.Action) -> str:
    """The provider a provider flag belongs to, from the `X only` its help ends with."""
    match = re.search(r"(\w+) only\b", action.help or "")
    return match.group(1).lower() if match else action.option_strings[0]


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {action.dest for action in parser._actions if action.dest not in ("help", "version")}


Warning = tuple[str, dict[str, Any]]


def parse_autoscaler_args(
    argv: Sequence[str],
    host: PluginHost,
    registry: Registry,
    command: str = "run",
    module: CommandModule | None = None,
    *,
    warn: bool = True,
) -> tuple[AutoscalingOptions, argparse.Namespace]:
    """Parse and validate autoscaler flags. Exits with status 2 on bad input.

    The warnings about the values (deprecated flags, flags with no effect here, values
    corrected) are logged when `warn`, else left in `namespace.startup_warnings` for the
    caller to log once logging is configured from these very flags.
    """
    parser = build_parser(host, registry, command, module)
    bool_flags = {
        option
        for action in parser._actions
        if action.option_strings and getattr(action, "metavar", None) == BOOL
        for option in action.option_strings
    }
    ns = parser.parse_args(normalize_bool_flags(normalize_flag_names(argv), bool_flags))
    options, deprecated = options_from_namespace(ns, _dests(parser))
    try:
        validate(options)
        validate_names("--cloud-provider", [options.cloud_provider], list(registry.cloud_providers), "cloud providers")
        validate_names("--expander", options.expander, list(registry.expanders), "expanders")
        validate_names("--estimator", [options.estimator], list(registry.estimators), "estimators")
    except OptionError as exc:
        parser.error(str(exc))
    if options.scheduler_config_file:
        try:
            options.scheduler_config = load_scheduler_config(options.scheduler_config_file)
        except SchedulerConfigError as exc:
            parser.error(str(exc))
    try:
        registry.check_expander_options(options)
    except ValueError as exc:  # the expander's own flags, e.g. --grpc-expander-url
        parser.error(str(exc))
    warnings: list[Warning] = [
        ("deprecated_flag", {"flag": spec.flag, "advice": spec.deprecated}) for spec in deprecated
    ]
    warnings += [
        ("flag_has_no_effect", {"flag": spec.flag, "value": value, "reason": spec.no_effect})
        for spec, value in ineffective_values(options, parser.provider_fallbacks)
    ]
    if options.scheduler_config.unknown_plugins:
        warnings.append(
            (
                "scheduler_plugins_not_simulated",
                {
                    "file": options.scheduler_config_file,
                    "plugins": ",".join(options.scheduler_config.unknown_plugins),
                    "reason": "not in-tree kube-scheduler plugins; the simulation runs the "
                    "in-tree filters only",
                },
            )
        )
    gates = ineffective_feature_gates(options)
    if gates:
        warnings.append(
            (
                "flag_has_no_effect",
                {
                    "flag": "--feature-gates",
                    "value": ",".join(gates),
                    "reason": "only the LoggingAlphaOptions and LoggingBetaOptions gates "
                    "(and AllAlpha, AllBeta) change something",
                },
            )
        )
    warnings += adjust(options)
    ns.startup_warnings = warnings
    if warn:
        log_startup_warnings(warnings)
    return options, ns


def log_startup_warnings(warnings: Sequence[Warning]) -> None:
    for event, fields in warnings:
        log.warning(event, **fields)


def _plugins_command(argv: Sequence[str]) -> int:
    parser = _Parser(prog="clusterscaler plugins", description=OTHER_COMMANDS["plugins"])
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    parser.add_argument(DISABLE_FLAG, dest="disable_plugins", default="", metavar="names")
    args = parser.parse_args(list(argv))
    host, registry = load_plugins(argv)
    doc = describe(host, registry)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    rows = [("DISTRIBUTION", "VERSION", "ENTRY POINT", "HOOKS")]
    for loaded in sorted(host.loaded, key=lambda p: (p.source.distribution, p.name)):
        rows.append(
            (
                loaded.source.distribution,
                loaded.source.version,
                loaded.name,
                ", ".join(h.removeprefix("clusterscaler_") for h in hook_names(loaded.plugin)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
    print()
    for key, label in (
        ("cloudProviders", "cloud providers"),
        ("expanders", "expanders"),
        ("estimators", "estimators"),
        ("podFilters", "pod filters"),
        ("podListProcessors", "pod-list processors"),
    ):
        print(f"{label}: {', '.join(doc[key]) or '(none)'}")
    return 0


def _top_level_help() -> str:
    lines = [
        "usage: clusterscaler [COMMAND] [flags]",
        "",
        "A pluggable, explainable Kubernetes cluster autoscaler.",
        "",
        "commands:",
    ]
    for name, (_, text) in AUTOSCALER_COMMANDS.items():
        lines.append(f"  {name:<13} {text}")
    for name, text in OTHER_COMMANDS.items():
        lines.append(f"  {name:<13} {text}")
    lines += [
        "",
        "Without a COMMAND, `run` is meant. The flags of each command:",
        *(f"  clusterscaler {name} --help" for name in (*AUTOSCALER_COMMANDS, *OTHER_COMMANDS)),
        f"{DISABLE_FLAG}=NAMES may come before the command too.",
    ]
    return "\n".join(lines)


def _disable_flags_after_command(args: list[str]) -> list[str]:
    """`clusterscaler --disable-plugins=x plugins ...` as `clusterscaler plugins --disable-plugins=x ...`."""
    leading: list[str] = []
    while args and (args[0] == DISABLE_FLAG or args[0].startswith(DISABLE_FLAG + "=")):
        take = 2 if args[0] == DISABLE_FLAG else 1
        leading += args[:take]
        args = args[take:]
    if leading and args and args[0] in (*AUTOSCALER_COMMANDS, *OTHER_COMMANDS):
        return [args[0], *leading, *args[1:]]
    return [*leading, *args]


def _import_command(command: str) -> CommandModule:
    module_name = AUTOSCALER_COMMANDS[command][0]
    module: Any = importlib.import_module(module_name)
    return module  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    """The `clusterscaler` command; `argv` defaults to the process's own arguments.

    Called without `argv` (the console script, `python -m clusterscaler`) the process ends
    when it returns. A one-shot command then keeps everything it made until that end:
    the cyclic collector is held off while modules, plugins and the parser are loaded (it
    would find nothing to free), they are frozen out of its reach before the command runs,
    and what the command built is frozen when it returns, so the interpreter's last
    collection passes at exit do not trace a whole cluster's model to free memory the
    process is about to give back. Exit handlers, buffered output and `logging` shut down
    as usual."""
    exits = argv is None
    args = _disable_flags_after_command(list(sys.argv[1:] if argv is None else argv))
    if args and args[0] in ("-h", "--help", "help"):
        print(_top_level_help())
        return 0
    command = "run"
    if args and args[0] in (*AUTOSCALER_COMMANDS, *OTHER_COMMANDS):
        command = args.pop(0)
    if command == "proportional":
        from clusterscaler.proportional import cli as proportional_cli

        return proportional_cli.main(args)
    one_shot = exits and command in ONE_SHOT_COMMANDS
    if one_shot:
        gc.disable()
    try:
        return _command(command, args, exits=one_shot)
    finally:
        if one_shot:
            gc.freeze()
            gc.enable()


def _command(command: str, args: list[str], *, exits: bool) -> int:
    try:
        if command == "plugins":
            return _plugins_command(args)
        host, registry = load_plugins(args)
    except PluginError as exc:
        print(f"clusterscaler: error: {exc}", file=sys.stderr)
        return RUNTIME_ERROR
    module = _import_command(command)
    options, ns = parse_autoscaler_args(args, host, registry, command, module, warn=False)
    try:
        configure_logging_from_options(options)
    except OSError as exc:
        print(f"clusterscaler: error: --log-file={options.log_file!r}: {exc}", file=sys.stderr)
        return USAGE_ERROR
    log_startup_warnings(ns.startup_warnings)
    if exits:
        gc.freeze()
        gc.enable()
    ctx = CommandContext(host=host, registry=registry, options=options, args=ns, exits=exits)
    return module.run(ctx)

"""Fuzz targets for the commands that read a file: `simulate --snapshot`, `simulate
SCENARIO`, `explain --snapshot`, `simulate --apply`, `simulate --cloud-config`, `run
--cloud-config` (of the sim, aws, gce and azure providers), `simulate
--scheduler-config-file` and `proportional calc
--params`, each given a mutated file (or document).
The command runs in-process through `main`, as the console script does; whatever the file:
- it exits 0 (the file still reads) or 2, never with a traceback or another status;
- on 2, its error line names the file (or the flag), in a bounded line, and, where the
  generator knows what it broke, one of the fields it changed and the object holding it.
A few cases go through a real `clusterscaler` process, for what only a process shows (the
exit status and stderr the shell sees)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import main
from fuzzkit import (
    EXAMPLES,
    HOSTILE_VALUES,
    QUICK_FUZZ,
    mutated,
    mutations,
    names_a_changed_field,
    readable_name,
    yaml_text,
)
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_configs import AWS_CONF, AZURE_JSON, GCE_CONF, ini_text
from test_fuzz_files import CLOUD_CONFIGS, SCENARIOS, hostile_snapshots_changed

pytestmark = pytest.mark.fuzz

SNAPSHOT = str(EXAMPLES / "snapshots" / "small-cluster.json")
GENERAL = str(EXAMPLES / "cloud-configs" / "general.yaml")
# The scenarios with their cloud-config named by absolute path: the mutated copy is written
# elsewhere.
SCENARIO_SEEDS = [
    {**doc, "cloudConfig": str((EXAMPLES / "scenarios" / doc["cloudConfig"]).resolve())}
    for doc in SCENARIOS.values()
]
MANIFESTS = [
    doc for doc in yaml.safe_load_all((EXAMPLES / "manifests" / "checkout.yaml").read_text())
    if doc
]
# A KubeSchedulerConfiguration using what `--scheduler-config-file` reads: one profile with
# filters disabled and enabled again, plugin args of each kind the simulation applies.
SCHEDULER_CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{
        "schedulerName": "default-scheduler",
        "plugins": {"filter": {"disabled": [{"name": "*"}], "enabled": [
            {"name": "NodeResourcesFit"}, {"name": "TaintToleration"}]},
            "preFilter": {"disabled": [{"name": "VolumeBinding"}]}},
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"],
                                                  "ignoredResourceGroups": ["example.org"]}},
            {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "ScheduleAnyway"}]}},
            {"name": "NodeAffinity", "args": {"addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In",
                                           "values": ["a"]}]}]}}}},
        ],
    }],
}
PROPORTIONAL = [
    {"linear": {"coresPerReplica": 256, "nodesPerReplica": 16, "min": 1, "max": 100,
                "preventSinglePointFailure": True}},
    {"ladder": {"coresToReplicas": [[1, 1], [64, 3]], "nodesToReplicas": [[1, 1], [2, 2]]}},
]


# What one command may cost on one mutated file, in CPU seconds (the files are a few KB).
COMMAND_CPU_SECONDS = 10.0


def run_cli(argv: list[str]) -> tuple[int, str]:
    """`clusterscaler ARGV` in-process: its exit status and what it wrote to stderr. A flag
    whose file is refused while the flags are parsed (`--scheduler-config-file`) exits
    through argparse, as the console script does."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, err.getvalue()


def _yaml_text(doc: Any) -> str | None:
    try:
        return yaml_text(doc, documents=isinstance(doc, list))
    except (RecursionError, ValueError, yaml.YAMLError):
        return None


def assert_exit_2_or_read(code: int, err: str, names: str) -> None:
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        errors = [line for line in err.splitlines() if "error:" in line]
        assert errors, err
        assert names in errors[-1], errors[-1]
        assert len(errors[-1]) < 4_000, f"an error line of {len(errors[-1])} characters"


@dataclass(frozen=True)
class CommandInput:
    """A command, the content of the file it reads (`{file}` in the command), and what the
    generator broke where it knows: the paths it changed in the document (in each of
    `--apply`'s documents, in one snapshot item) and the object holding them, by name."""

    command: str
    content: bytes
    changes: list[Any] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)


def _named_object(raw: Any) -> list[str]:
    name = readable_name(raw)
    return [name[1]] if name is not None and len(name[1]) <= 80 else []


@st.composite
def command_inputs(draw: st.DrawFn) -> CommandInput:
    """A command and the mutated content of the file it reads."""
    command = draw(st.sampled_from(
        ["simulate-snapshot", "explain-snapshot", "scenario", "apply", "simulate-cloud-config",
         "run-cloud-config", "run-aws", "run-gce", "run-azure", "scheduler-config"]))
    if command.endswith("snapshot"):
        data, item, changes = draw(hostile_snapshots_changed())
        return CommandInput(command, data, changes, _named_object(item))
    if command in ("run-aws", "run-gce"):
        text = draw(ini_text(AWS_CONF if command == "run-aws" else GCE_CONF))
        return CommandInput(command, text.encode())
    if command == "run-azure":
        doc, changes = draw(st.one_of(mutations([AZURE_JSON]), HOSTILE_VALUES.map(_unknown)))
        try:
            return CommandInput(command, json.dumps(doc).encode(), changes)
        except (RecursionError, ValueError):
            return CommandInput(command, b"[" * 100_000)
    seeds = {"scenario": SCENARIO_SEEDS, "apply": MANIFESTS,
             "scheduler-config": [SCHEDULER_CONFIG]}.get(command, CLOUD_CONFIGS)
    objects: list[str] = []
    if command == "apply":
        drawn = draw(st.lists(mutations(seeds), min_size=1, max_size=2))
        doc: Any = [d for d, _ in drawn]
        changes = [path for _, paths in drawn for path in paths]
        objects = [name for d, _ in drawn for name in _named_object(d)]
    else:
        doc, changes = draw(st.one_of(mutations(seeds), mutations(seeds),
                                      HOSTILE_VALUES.map(_unknown)))
    text = _yaml_text(doc)
    if text is None:
        return CommandInput(command, b"[" * 100_000)
    return CommandInput(command, text.encode(), changes, objects)


def _unknown(doc: Any) -> tuple[Any, list[Any]]:
    """A document that is a hostile value as a whole: no field of it is known to be wrong."""
    return doc, []


# What refuses a text as a whole (its YAML or JSON, before any field is read): named by the
# file, the line or the bound, not by a field.
TEXT_REFUSALS = ("YAML", "JSON", "nested", "digits", "UTF-8", "gzip")


def assert_names_what_was_broken(line: str, given: CommandInput) -> None:
    """The error line names a field the generator changed and, in a file of several
    objects, the object holding it; unless it refuses the text as a whole."""
    if not given.changes or any(refusal in line for refusal in TEXT_REFUSALS):
        return
    if any(other in line for other in ("--kubeconfig", "given more than once",
                                       "built-in demo: initialNodes")):
        # The file read, and the command stopped at the missing kubeconfig; two of
        # `--apply`'s mutated documents are the same object, which the error names; or the
        # demo's initial nodes name a group that a seed cloud-config other than the demo's
        # lacks, which the error names with the file.
        return
    assert names_a_changed_field(line, given.changes), (line, given.changes)
    if given.objects:
        # A name holding a character that is not printable is shown escaped.
        shown = [form for name in given.objects for form in (name, repr(name)[1:-1])]
        assert any(name in line for name in shown) or re.search(
            r"items\[\d+\]|document \d+", line), (line, given.objects)


ARGV = {
    "simulate-snapshot": ["simulate", "--snapshot", "{file}", "--once", "--json"],
    "explain-snapshot": ["explain", "--snapshot", "{file}", "--json"],
    "scenario": ["simulate", "{file}", "--once", "--json"],
    "apply": ["simulate", "--snapshot", SNAPSHOT, "--apply", "{file}", "--once", "--json"],
    "simulate-cloud-config": ["simulate", "--cloud-config", "{file}", "--once", "--json"],
    "scheduler-config": ["simulate", "--snapshot", SNAPSHOT, "--scheduler-config-file={file}",
                         "--once", "--json"],
    # A cloud-config that reads leaves the command at the missing kubeconfig: exit 2 too,
    # and nothing reaches for a cluster.
    "run-cloud-config": ["run", "--cloud-provider=sim", "--cloud-config={file}",
                         "--kubeconfig=/nonexistent/kubeconfig"],
    "run-aws": ["run", "--cloud-provider=aws", "--cloud-config={file}", "--nodes=1:3:asg-1",
                "--kubeconfig=/nonexistent/kubeconfig"],
    "run-gce": ["run", "--cloud-provider=gce", "--cloud-config={file}",
                "--nodes=1:3:p-12345/us-central1-b/mig-1", "--kubeconfig=/nonexistent/kubeconfig"],
    "run-azure": ["run", "--cloud-provider=azure", "--cloud-config={file}",
                  "--nodes=1:3:vmss-1", "--kubeconfig=/nonexistent/kubeconfig"],
}


@QUICK_FUZZ
@given(given_input=command_inputs())
def test_a_command_given_a_mutated_file_exits_2_naming_it(given_input: CommandInput) -> None:
    command, content = given_input.command, given_input.content
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / ("input.json" if "snapshot" in command else "input.yaml")
        path.write_bytes(content)
        argv = [arg.replace("{file}", str(path)) for arg in ARGV[command]]
        started = time.process_time()
        code, err = run_cli(argv)
        cpu = time.process_time() - started
    # In CPU time, whatever the load: a command on a file of a few KB takes well under a second.
    assert cpu <= COMMAND_CPU_SECONDS, f"{command}: {cpu:.1f} CPU seconds"
    if command.startswith("run-"):
        assert code == 2, (code, err)
        # The file; or the cloud-config when what is missing may come from the environment
        # too (no region, no subscription); or, once the file reads, the missing kubeconfig.
        names = next((n for n in (str(path), "cloud-config", "--kubeconfig") if n in err), "")
        assert names, err
    else:
        names = str(path)
    assert_exit_2_or_read(code, err, names)
    if code == 2 and names in (str(path), "cloud-config"):
        line = [line for line in err.splitlines() if "error:" in line][-1]
        assert_names_what_was_broken(line, given_input)


@QUICK_FUZZ
@given(doc=st.one_of(mutated(PROPORTIONAL), HOSTILE_VALUES))
def test_proportional_calc_given_mutated_params_exits_2_naming_them(doc: Any) -> None:
    try:
        params = json.dumps(doc)
    except (RecursionError, ValueError):
        return
    code, err = run_cli(["proportional", "calc", f"--params={params}", "--nodes", "3",
                         "--cores", "12"])
    assert_exit_2_or_read(code, err, "invalid params")


# Through a real process: what the shell sees.
PROCESS_CASES = [
    pytest.param(["simulate", "--snapshot", "{file}", "--once"],
                 b'{"kind": "List", "items": [{"kind": "Node", "apiVersion": "v1", '
                 b'"metadata": {"name": "n1"}, "status": ["Ready"]}]}',
                 "Node n1: status: expected an object", id="snapshot-node-status-list"),
    pytest.param(["explain", "--snapshot", "{file}"], b"kind: List\nitems:\n- " + b"[" * 50_000,
                 "nested at most 200 levels deep", id="snapshot-yaml-nested-50000"),
    pytest.param(["run", "--cloud-provider=sim", "--cloud-config={file}"],
                 Path(GENERAL).read_bytes().replace(b"minSize: 1", b"minSize: lots", 1), "minSize",
                 id="run-cloud-config-min-size"),
]


@pytest.mark.parametrize(("argv", "content", "message"), PROCESS_CASES)
def test_a_mutated_file_exits_2_from_a_real_process(
    argv: list[str], content: bytes, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "input"
    path.write_bytes(content)
    done = subprocess.run(
        [sys.executable, "-m", "clusterscaler", *(a.replace("{file}", str(path)) for a in argv)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if "error:" in line][-1]
    assert str(path) in error and message in error, error

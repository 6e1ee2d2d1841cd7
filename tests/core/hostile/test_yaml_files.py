"""The YAML files a user names (a scenario, a sim cloud-config, a kubeconfig, a scheduler
configuration, an `--apply` manifest, node-group bounds, the externalgrpc cloud-config) are
read by one reader: a file that cannot be read, is larger than its bound, is not UTF-8 or is
not YAML is an error of one line that names the file as its flag does, never a traceback. A
snapshot (JSON or YAML, gzipped or not) is read with the same bound on its bytes, gunzipped
included."""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.api import ConfigurationError
from clusterscaler.framework.schedulerconfig import SchedulerConfigError, load_scheduler_config
from clusterscaler.kube.client import ClientSettings, KubeConfigError, build_api_client
from clusterscaler.offline import loader
from clusterscaler.offline.inference import load_bounds
from clusterscaler.offline.loader import InputError, load_snapshot
from clusterscaler.offline.manifests import load_manifests
from clusterscaler.offline.scenario import load_scenario
from clusterscaler.plugins.sim.config import load_cloud_config
from clusterscaler_externalgrpc.config import load_config as load_externalgrpc_config


@dataclass(frozen=True)
class Reader:
    read: Callable[[Path], object]
    # How the reader names its file in an error.
    where: str
    error: type[Exception]
    # What a parse error says the file was expected to hold, and in what language.
    expected: str
    # The bound on its bytes, in MiB: settings files are small, a scenario or a manifest
    # holds objects.
    bound: int
    language: str = "YAML"


READERS = {
    "scenario": Reader(load_scenario, "scenario {!r}", InputError, "a YAML scenario", 256),
    "cloud-config": Reader(load_cloud_config, "--cloud-config {!r}", ConfigurationError,
                           "YAML declaring nodeGroups", 16),
    "kubeconfig": Reader(lambda p: build_api_client(ClientSettings(kubeconfig=str(p))),
                         "--kubeconfig {!r}", KubeConfigError, "a kubeconfig in YAML", 16),
    "scheduler-config": Reader(lambda p: load_scheduler_config(str(p)),
                               "--scheduler-config-file {}", SchedulerConfigError,
                               "a KubeSchedulerConfiguration", 16, "YAML or JSON"),
    "apply": Reader(lambda p: load_manifests(str(p)), "--apply {!r}", InputError,
                    "Kubernetes objects in YAML or JSON", 256),
    "node-group-bounds": Reader(lambda p: load_bounds(str(p)), "--node-group-bounds {!r}",
                                InputError, "YAML (nodeGroups: {<node group>: {minSize: "
                                "<int>, maxSize: <int>, price: <per node-hour>}})", 16),
    "externalgrpc-cloud-config": Reader(
        lambda p: load_externalgrpc_config(str(p)),
        "externalgrpc provider: --cloud-config={}", ConfigurationError,
        "a YAML mapping with the keys address, key, cert, cacert, grpc_timeout", 16),
}

CASES = [
    # A byte of Latin-1 text escaped the scenario and cloud-config readers as
    # UnicodeDecodeError, a traceback.
    (b"nodeGroups: [] # caf\xe9\n", "expected UTF-8 text, got byte 0xe9 at offset 20", False),
    # PyYAML's message took four lines, naming the text "<unicode string>".
    (b"a: [1,\n", "did not find expected node content at line 2, column 1", True),
    (b"[" * 300, "expected YAML nested at most 200 levels deep, got deeper nesting at line 1",
     True),
]


@pytest.mark.parametrize("name", list(READERS))
@pytest.mark.parametrize(("data", "message", "parse_error"), CASES,
                         ids=["latin-1", "not-yaml", "too-deep"])
def test_a_malformed_yaml_file_is_one_line_naming_it(
    name: str, data: bytes, message: str, parse_error: bool, tmp_path: Path
) -> None:
    reader = READERS[name]
    path = tmp_path / "file.yaml"
    path.write_bytes(data)
    with pytest.raises(reader.error) as caught:
        reader.read(path)
    text = str(caught.value)
    assert len(text.splitlines()) == 1, text
    where = reader.where.format(str(path))
    if parse_error:
        assert text.startswith(
            f"{where}: expected {reader.expected}, got text that is not valid "
            f"{reader.language}: {message}"
        ), text
    else:
        assert text == f"{where}: {message}", text


@pytest.mark.parametrize("name", [n for n in READERS if n != "kubeconfig"])
def test_a_file_that_cannot_be_read_is_named(name: str, tmp_path: Path) -> None:
    reader = READERS[name]
    with pytest.raises(reader.error) as caught:
        reader.read(tmp_path)
    assert str(caught.value) == (
        f"{reader.where.format(str(tmp_path))}: cannot read the file: Is a directory"
    )


@pytest.mark.parametrize("name", [n for n in READERS if READERS[n].bound == 16])
def test_an_endless_file_is_refused_after_its_bound(name: str) -> None:
    """`--cloud-config /dev/zero` was read without end."""
    reader = READERS[name]
    with pytest.raises(reader.error) as caught:
        reader.read(Path("/dev/zero"))
    assert str(caught.value) == (
        f"{reader.where.format('/dev/zero')}: expected a file of at most {reader.bound} MiB, "
        "got more"
    )


@pytest.mark.parametrize("name", list(READERS))
def test_a_file_larger_than_its_bound_is_refused_unread(name: str, tmp_path: Path) -> None:
    """A file one byte over the bound is refused before it is read (a sparse file: its
    size is known first)."""
    reader = READERS[name]
    path = tmp_path / "file.yaml"
    with path.open("wb") as handle:
        handle.truncate(reader.bound * 2**20 + 1)
    with pytest.raises(reader.error) as caught:
        reader.read(path)
    assert str(caught.value) == (
        f"{reader.where.format(str(path))}: expected a file of at most {reader.bound} MiB, "
        "got more"
    )


def test_a_snapshot_larger_than_4_gib_is_refused_unread(tmp_path: Path) -> None:
    """A 5,000-node cluster's `kubectl get -o json` is hundreds of MB: 4 GiB is the bound."""
    path = tmp_path / "cluster.json"
    with path.open("wb") as handle:
        handle.truncate(4096 * 2**20 + 1)
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert str(caught.value) == (
        f"--snapshot {str(path)!r}: expected a file of at most 4096 MiB, got more"
    )


class _EndlessSpaces(io.RawIOBase):
    """Standard input that never ends: spaces, which a JSON or YAML file may start with."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        buffer[:] = b" " * len(buffer)
        self.given += len(buffer)
        return len(buffer)


def test_an_endless_snapshot_is_refused_after_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_SNAPSHOT_BYTES", 2**20)
    endless = _EndlessSpaces()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(endless)))
    with pytest.raises(InputError) as caught:
        load_snapshot("-")
    assert str(caught.value) == "--snapshot '<stdin>': expected a file of at most 1 MiB, got more"
    assert endless.given < 2 * 2**20


def test_a_device_named_by_mistake_is_refused_at_its_first_bytes() -> None:
    """`--snapshot /dev/zero` is not text: refused on its first 4 MiB at the 4 GiB bound,
    not after buffering 4 GiB of zeros."""
    with pytest.raises(InputError) as caught:
        load_snapshot("/dev/zero")
    assert str(caught.value) == (
        "--snapshot '/dev/zero': expected UTF-8 text (JSON or YAML), got byte 0x00 at offset 0"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"\xff\xfe{}", "got byte 0xff at offset 0"),
     (b'{"kind": "List",\0 "items": []}', "got byte 0x00 at offset 16"),
     (gzip.compress(b"\0" * 100), "got byte 0x00 at offset 0")],
    ids=["utf16-mark", "nul", "gzip-of-zeros"],
)
def test_a_snapshot_that_is_not_text_is_refused_naming_the_byte(
    data: bytes, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "cluster.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert str(caught.value) == (
        f"--snapshot {str(path)!r}: expected UTF-8 text (JSON or YAML), {message}"
    )


def test_a_snapshot_on_stdin_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_SNAPSHOT_BYTES", 2**20)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b" " * (2**20 + 1))))
    with pytest.raises(InputError) as caught:
        load_snapshot("-")
    assert str(caught.value) == "--snapshot '<stdin>': expected a file of at most 1 MiB, got more"


def test_a_gzip_bomb_is_bounded_by_what_it_gunzips_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """8 KB that gunzip to 8 MiB: the bound is on the gunzipped bytes, not the file's."""
    monkeypatch.setattr(loader, "MAX_SNAPSHOT_BYTES", 2**20)
    path = tmp_path / "cluster.json.gz"
    path.write_bytes(gzip.compress(b" " * 8 * 2**20))
    assert path.stat().st_size < 2**20
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert str(caught.value) == (
        f"--snapshot {str(path)!r}: expected a gzip stream that gunzips to at most 1 MiB, "
        "got more"
    )

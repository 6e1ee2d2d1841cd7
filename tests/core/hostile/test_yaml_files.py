"""The YAML files a user names (a scenario, a sim cloud-config, a kubeconfig) are read by one
reader: a file that cannot be read, is larger than its bound, is not UTF-8 or is not YAML is
an error of one line that names the file as its flag does, never a traceback. A snapshot
(JSON or YAML, gzipped or not) is read with the same bound on its bytes, gunzipped
included."""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from clusterscaler.api import ConfigurationError
from clusterscaler.kube.client import ClientSettings, KubeConfigError, build_api_client
from clusterscaler.offline import loader
from clusterscaler.offline.loader import InputError, load_snapshot
from clusterscaler.offline.scenario import load_scenario
from clusterscaler.plugins.sim.config import load_cloud_config


def _kubeconfig(path: Path) -> object:
    return build_api_client(ClientSettings(kubeconfig=str(path)))


# How each reader names its file, the error it raises and what a YAML error says it expected.
READERS: dict[str, tuple[Callable[[Path], object], str, type[Exception], str]] = {
    "scenario": (load_scenario, "scenario {!r}", InputError, "a YAML scenario"),
    "cloud-config": (load_cloud_config, "--cloud-config {!r}", ConfigurationError,
                     "YAML declaring nodeGroups"),
    "kubeconfig": (_kubeconfig, "--kubeconfig {!r}", KubeConfigError, "a kubeconfig in YAML"),
}

CASES = [
    # A byte of Latin-1 text escaped the scenario and cloud-config readers as
    # UnicodeDecodeError, a traceback.
    (b"nodeGroups: [] # caf\xe9\n", "expected UTF-8 text, got byte 0xe9 at offset 20"),
    # PyYAML's message took four lines, naming the text "<unicode string>".
    (b"a: [1,\n", "got text that is not valid YAML: did not find expected node content at "
     "line 2, column 1"),
    (b"[" * 300, "got text that is not valid YAML: expected YAML nested at most 200 levels "
     "deep, got deeper nesting at line 1"),
]


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(("data", "message"), CASES, ids=["latin-1", "not-yaml", "too-deep"])
def test_a_malformed_yaml_file_is_one_line_naming_it(
    reader: str, data: bytes, message: str, tmp_path: Path
) -> None:
    read, where, error, expected = READERS[reader]
    path = tmp_path / "file.yaml"
    path.write_bytes(data)
    with pytest.raises(error) as caught:
        read(path)
    text = str(caught.value)
    assert len(text.splitlines()) == 1, text
    assert text.startswith(f"{where.format(str(path))}: "), text
    assert message in text, text
    if "YAML:" in message:
        assert f": expected {expected}, got text that is not valid YAML: " in text, text


@pytest.mark.parametrize("reader", ["scenario", "cloud-config"])
def test_a_file_that_cannot_be_read_is_named(reader: str, tmp_path: Path) -> None:
    read, where, error, _ = READERS[reader]
    with pytest.raises(error) as caught:
        read(tmp_path)
    assert str(caught.value) == (
        f"{where.format(str(tmp_path))}: cannot read the file: Is a directory"
    )


# The bound on each reader's bytes: settings files are small, a scenario holds objects.
BOUNDS = {"scenario": 256, "cloud-config": 16, "kubeconfig": 16}


@pytest.mark.parametrize("reader", ["cloud-config", "kubeconfig"])
def test_an_endless_file_is_refused_after_its_bound(reader: str) -> None:
    """`--cloud-config /dev/zero` was read without end."""
    read, where, error, _ = READERS[reader]
    with pytest.raises(error) as caught:
        read(Path("/dev/zero"))
    assert str(caught.value) == (
        f"{where.format('/dev/zero')}: expected a file of at most {BOUNDS[reader]} MiB, got more"
    )


@pytest.mark.parametrize("reader", list(READERS))
def test_a_file_larger_than_its_bound_is_refused_unread(reader: str, tmp_path: Path) -> None:
    """A file one byte over the bound is refused before it is read (a sparse file: its
    size is known first)."""
    read, where, error, _ = READERS[reader]
    path = tmp_path / "file.yaml"
    with path.open("wb") as handle:
        handle.truncate(BOUNDS[reader] * 2**20 + 1)
    with pytest.raises(error) as caught:
        read(path)
    assert str(caught.value) == (
        f"{where.format(str(path))}: expected a file of at most {BOUNDS[reader]} MiB, got more"
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


def test_an_endless_snapshot_is_refused_after_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_SNAPSHOT_BYTES", 2**20)
    with pytest.raises(InputError) as caught:
        load_snapshot("/dev/zero")
    assert str(caught.value) == "--snapshot '/dev/zero': expected a file of at most 1 MiB, got more"


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

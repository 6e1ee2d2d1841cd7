"""The container image of deploy/Dockerfile (clusterscaler.testing.image, scripts/image.sh).

The tests marked ``image`` build the Dockerfile unchanged with buildah on a stand-in for its
base made with debootstrap, and start the image with podman as deploy/'s Deployments run it
(user 65534, read-only root filesystem, no capabilities). They take minutes, so the default
run leaves them out (``-m 'not image'`` in pyproject's addopts): ``pytest -m image`` runs
them (docs/testing.md). The others check, in the default run, what the build relies on.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path, PurePosixPath

import pytest
from clusterscaler.testing import image

ROOT = Path(__file__).resolve().parents[2]


def test_every_base_of_the_dockerfile_has_a_stand_in() -> None:
    bases = image.base_images()
    assert bases, "deploy/Dockerfile names no base image"
    assert set(bases) <= set(image.STAND_INS), (
        f"deploy/Dockerfile builds on {bases}; give each a stand-in in STAND_INS "
        "(clusterscaler/testing/image.py) so that `pytest -m image` can build it"
    )


def test_base_images_skip_the_dockerfiles_own_stages(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM python:3.11-slim AS build\nRUN true\n"
        "FROM --platform=linux/amd64 debian:bookworm as other\n"
        "FROM build\nFROM python:3.11-slim\n"
    )
    assert image.base_images(dockerfile) == ["python:3.11-slim", "debian:bookworm"]


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("python:3.11-slim", "docker.io/library/python:3.11-slim"),
        ("bitnami/kubectl:1.36", "docker.io/bitnami/kubectl:1.36"),
        ("ghcr.io/clusterscaler/clusterscaler:0.1.0", "ghcr.io/clusterscaler/clusterscaler:0.1.0"),
        ("localhost/base:1", "localhost/base:1"),
        ("registry:5000/base:1", "registry:5000/base:1"),
    ],
)
def test_short_names_are_qualified_as_docker_qualifies_them(name: str, stored: str) -> None:
    assert image._qualified(name) == stored


def _context(root: Path) -> Path:
    (root / "core" / "__pycache__").mkdir(parents=True)
    (root / "core" / "a.py").write_text("A = 1\n")
    (root / "core" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text("")
    (root / "README.md").write_text("readme\n")
    (root / ".dockerignore").write_text("# comment\n**/__pycache__\ntests\n")
    dockerfile = root / "Dockerfile"
    dockerfile.write_text("FROM python:3.11-slim\nCOPY README.md ./\nCOPY core ./core\n"
                          "COPY --from=build /opt /opt\n")
    return dockerfile


def test_the_context_digest_follows_what_the_build_copies(tmp_path: Path) -> None:
    dockerfile = _context(tmp_path)
    first = image.context_digest(dockerfile, tmp_path)
    # What the build does not read leaves it unchanged: ignored or not copied.
    (tmp_path / "core" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\1")
    (tmp_path / "tests" / "test_a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not copied\n")
    assert image.context_digest(dockerfile, tmp_path) == first
    # A copied file's content, a new copied file, the mode and the Dockerfile change it.
    changes = [
        lambda: (tmp_path / "core" / "a.py").write_text("A = 2\n"),
        lambda: (tmp_path / "core" / "b.py").write_text(""),
        lambda: (tmp_path / "core" / "b.py").chmod(0o755),
        lambda: (tmp_path / "README.md").write_text("readme 2\n"),
        lambda: (tmp_path / ".dockerignore").write_text("**/__pycache__\n"),
        lambda: dockerfile.write_text(dockerfile.read_text() + "USER 65534:65534\n"),
    ]
    seen = {first}
    for change in changes:
        change()
        digest = image.context_digest(dockerfile, tmp_path)
        assert digest not in seen
        seen.add(digest)


def test_the_repository_context_leaves_out_what_dockerignore_names() -> None:
    patterns = image._ignore_patterns(ROOT)
    assert image._ignored(PurePosixPath("core/__pycache__/x.pyc"), patterns)
    assert image._ignored(PurePosixPath("providers/aws/build/lib/x.py"), patterns)
    assert image._ignored(PurePosixPath("tests/deploy/test_image.py"), patterns)
    assert not image._ignored(PurePosixPath("core/testing/image.py"), patterns)


def test_the_debian_mirror_comes_from_apt_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERSCALER_DEBIAN_MIRROR", "http://mirror.example/debian")
    assert image.debian_mirror() == "http://mirror.example/debian"
    monkeypatch.delenv("CLUSTERSCALER_DEBIAN_MIRROR")
    assert image.debian_mirror().rstrip("/").endswith("/debian")


def test_missing_tools_are_named_with_their_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image.shutil, "which", lambda name: None)
    with pytest.raises(image.ImageError, match=r"apt-get install -y buildah podman runc "
                       r"debootstrap") as raised:
        image.engine()
    assert "buildah, podman, debootstrap, runc: not found" in str(raised.value)


# ---------------------------------------------------------------------------------------------
# The image itself: built, started and checked (minutes; `pytest -m image`)


@pytest.fixture(scope="module")
def built() -> image.Built:
    return image.build()


@pytest.mark.parametrize("check", image.CHECKS, ids=[c.__name__ for c in image.CHECKS])
@pytest.mark.image
@pytest.mark.timeout(1800)
def test_the_built_image(built: image.Built, check: image.Check) -> None:
    """Each check (see clusterscaler.testing.image): the image's user, entrypoint and port;
    --help; --version; every provider loads; the demo's first loop; `run` serving
    /health-check and /metrics as user 65534 on a read-only root with no pip."""
    assert check(built)


@pytest.mark.image
@pytest.mark.timeout(600)
def test_the_checks_refuse_an_image_run_as_root(built: image.Built) -> None:
    """The same image with `USER 0` (what a Dockerfile without its USER line gives): the
    configuration check and the running process's ids both say so."""
    eng = built.engine
    name = "localhost/clusterscaler:as-root"
    container = subprocess.run(eng.buildah("from", "--pull=never", built.image), check=True,
                               capture_output=True, text=True).stdout.strip()
    try:
        subprocess.run(eng.buildah("config", "--user", "0:0", container), check=True)
        subprocess.run(eng.buildah("commit", "--quiet", container, name), check=True,
                       capture_output=True)
    finally:
        subprocess.run(eng.buildah("rm", container), check=False, capture_output=True)
    as_root = dataclasses.replace(built, image=name)
    try:
        with pytest.raises(image.ImageError, match=r"User is '0:0', want '65534:65534'"):
            image.check_config(as_root)
        with pytest.raises(image.ImageError, match=r"process 1 runs with .*want 65534"):
            image.check_serving(as_root)
    finally:
        subprocess.run(eng.buildah("rmi", name), check=False, capture_output=True)

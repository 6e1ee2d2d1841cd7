"""Package list for the `clusterscaler` distribution.

`core/` is the import package `clusterscaler` and `plugins/` is `clusterscaler.plugins`
(see `[tool.setuptools.package-dir]` in pyproject.toml). Sub-packages are discovered here so
that a new folder under either tree is packaged without editing the metadata.
"""

import json
import os
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


class BuildWithCommit(build_py):
    """Records the commit the wheel is built from in clusterscaler/build.json (read by
    `clusterscaler --version`): CLUSTERSCALER_COMMIT, else git's HEAD, else nothing."""

    def run(self) -> None:
        super().run()
        commit = os.environ.get("CLUSTERSCALER_COMMIT", "")
        if not commit:
            try:
                out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                     text=True, timeout=10, check=False,
                                     cwd=Path(__file__).parent)
                commit = out.stdout.strip() if out.returncode == 0 else ""
            except OSError:
                commit = ""
        if commit:
            target = Path(self.build_lib) / "clusterscaler" / "build.json"
            target.write_text(json.dumps({"commit": commit}) + "\n")


def _packages() -> list[str]:
    packages = ["clusterscaler", "clusterscaler.plugins"]
    packages += [f"clusterscaler.{name}" for name in find_packages("core")]
    packages += [f"clusterscaler.plugins.{name}" for name in find_packages("plugins")]
    return packages


setup(packages=_packages(), cmdclass={"build_py": BuildWithCommit})

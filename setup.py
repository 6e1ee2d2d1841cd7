"""Package list for the `clusterscaler` distribution.

`core/` is the import package `clusterscaler` and `plugins/` is `clusterscaler.plugins`
(see `[tool.setuptools.package-dir]` in pyproject.toml). Sub-packages are discovered here so
that a new folder under either tree is packaged without editing the metadata.
"""

from setuptools import find_packages, setup


def _packages() -> list[str]:
    packages = ["clusterscaler", "clusterscaler.plugins"]
    packages += [f"clusterscaler.{name}" for name in find_packages("core")]
    packages += [f"clusterscaler.plugins.{name}" for name in find_packages("plugins")]
    return packages


setup(packages=_packages())

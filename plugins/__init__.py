"""The standard plugins shipped with clusterscaler.

They register through the `clusterscaler` entry-point group declared in the root
pyproject.toml, exactly as third-party plugins do; the core never imports them by name.
"""

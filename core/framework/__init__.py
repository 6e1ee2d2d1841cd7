"""The framework every other part stands on: plugin hooks and the registry, the
cloud-provider protocols, the options (flags) and their durations, the cluster source and
actions protocols, the dry-run wrappers and the one-line error descriptions.

Imports: `clusterscaler.model` only (and the standard library, pluggy). Everything else in
the core may import from here.
"""

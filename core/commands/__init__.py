"""The command line: `cli` parses flags and dispatches; `run` is the autoscaler against a
live cluster with its Kubernetes `runtime`; `simulate` and `explain` run the loop against
the offline cluster; `flagdocs` renders the flag reference.

Imports: anything in the core. Nothing imports `commands` but `__main__`.
"""

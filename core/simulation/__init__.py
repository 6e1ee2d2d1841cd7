"""`clusterscaler simulate`: the real autoscaling loop against an in-memory cluster.

`clock` is the virtual clock; `cluster` the in-memory cluster (nodes that take time to
provision, a scheduler that binds pending pods, controllers that recreate drained pods);
`loader` reads snapshots; `scenario` reads scenario files; `setup` turns flags and a
scenario into options, a cluster, the `sim` provider and the loop; `runner` drives the loop
on the virtual clock; `output` renders the timeline, summary, JSON and plot; `command` is
the CLI. `demo.yaml` is the scenario `clusterscaler simulate` runs without arguments.
"""

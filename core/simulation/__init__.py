"""`clusterscaler simulate`: the real autoscaling loop against an in-memory cluster.

`clock` is the virtual clock, `cluster` the in-memory cluster (nodes that take time to
provision, a scheduler that binds pending pods, controllers that recreate drained pods),
`scenario` the scenario files, `loader` the snapshots, `runner` the loop on the virtual
clock, `output` the timeline, summary, JSON lines and plot, `command` the CLI.
"""

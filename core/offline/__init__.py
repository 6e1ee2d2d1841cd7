"""The offline cluster that `clusterscaler simulate` and `explain` run the real loop against.

`clock` is the virtual clock; `cluster` the in-memory cluster (nodes that take time to
provision, a scheduler that binds pending pods, controllers that recreate drained pods);
`loader` reads snapshots; `inference` finds the node groups of a real cluster's snapshot
(for a run without a cloud-config); `cloudgroups` reads the node groups of a real cloud
provider, read only (for `--from-cluster` with a `--cloud-provider`); `scenario` reads
scenario files; `setup` turns flags and a scenario into options, a cluster, the `sim`
provider and the loop; `runner` drives the loop on the virtual clock; `output` renders the
timeline, summary, JSON and plot. `demo.yaml` is the scenario `clusterscaler simulate` runs
without arguments. The commands themselves are
`clusterscaler.commands.simulate` and `clusterscaler.commands.explain`.

Imports: `framework`, `model`, `simulator`, `loop`, `report`. Never `kube` or `commands`.
"""

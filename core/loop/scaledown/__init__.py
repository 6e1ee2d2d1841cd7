"""Scale-down: which nodes are unneeded, which of them to remove now, and removing them.

`nodeeligibility` filters nodes that may be considered at all, `removal` simulates moving
their pods elsewhere, `unneeded` keeps the unneeded-since timers, `budgets` bounds how many
nodes go at once, `planner` puts these together into a `ScaleDownPlan`, and `actuator`
carries it out (taint, cordon, evict, delete) and rolls back on failure. The actuator taints in the loop
and finishes each deletion on an `executor` (in the background for `clusterscaler run`);
`tracker` keeps the deletions in flight between loops and their outcomes until reported.
"""

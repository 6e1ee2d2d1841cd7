"""Scale-down: which nodes are unneeded, which of them to remove now, and removing them.

`eligibility` filters nodes that may be considered at all, `removal` simulates moving their
pods elsewhere, `unneeded` keeps the unneeded-since timers, `budgets` bounds how many nodes
go at once, `planner` puts these together into a `ScaleDownPlan`, and `actuator` carries it
out (taint, cordon, evict, delete) and rolls back on failure.
"""

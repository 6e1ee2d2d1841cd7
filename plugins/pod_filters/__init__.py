"""The standard pod filters: Cluster Autoscaler's drainability rules."""

"""The `sim` cloud provider: node groups from a YAML cloud-config, nodes as Node objects."""

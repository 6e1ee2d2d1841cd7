import clusterscaler_example_expander


def test_the_hook_registers_the_expander(register_plugin):
    registry = register_plugin(clusterscaler_example_expander, name="smallest-group")
    assert "smallest-group" in registry.expanders


def test_the_entry_point_is_installed(installed_plugins):
    _, registry = installed_plugins  # this distribution installed in the venv, editable
    entry = registry.expanders["smallest-group"]
    assert entry.source.distribution == "clusterscaler-example-expander"

"""The Kubernetes client's generated packages are light: imported as used, the same
classes as the eager import gives, and run whole when their layout is not understood."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from clusterscaler.kube.lazyclient import imports_of, light_package

PACKAGES = ("kubernetes", "kubernetes.client", "kubernetes.client.api", "kubernetes.client.models")

# For each package, each public name it binds: where the object comes from.
DESCRIBE = textwrap.dedent(
    """
    import importlib, json, sys, types
    out = {}
    for name in %r:
        package = importlib.import_module(name)
        names = {}
        for attr in dir(package):
            if attr.startswith("_"):
                continue
            value = getattr(package, attr)
            if isinstance(value, types.ModuleType):
                names[attr] = "module " + value.__name__
            elif isinstance(value, type):
                names[attr] = "class " + value.__module__ + "." + value.__qualname__
            else:
                names[attr] = "value " + repr(value)
        out[name] = names
    print(json.dumps(out))
    """
) % (PACKAGES,)


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_autoscaler_imports_only_the_client_classes_it_uses() -> None:
    out = _python(textwrap.dedent(
        """
        import json, sys
        import clusterscaler
        from kubernetes import client, config, watch
        from kubernetes.client.rest import ApiException
        api = client.CoreV1Api(client.ApiClient())
        class Answer:
            data = json.dumps({"metadata": {"name": "web-1"},
                               "spec": {"containers": [{"name": "web"}]}})
        pod = api.api_client.deserialize(Answer(), "V1Pod")
        import kubernetes
        print(json.dumps({
            "pod": [type(pod).__name__, pod.metadata.name, pod.spec.containers[0].name],
            "same": client.V1Pod is client.models.V1Pod is type(pod),
            "version": kubernetes.__version__,
            "modules": sorted(m for m in sys.modules if m.startswith("kubernetes")),
        }))
        """
    ))
    doc = json.loads(out)
    assert doc["pod"] == ["V1Pod", "web-1", "web"]
    assert doc["same"] is True
    from importlib.metadata import version

    assert doc["version"] == version("kubernetes")
    modules = doc["modules"]
    # One API, the models the answer held (a pod, its metadata, spec and container), not
    # the 60 APIs and 750 models the eager import loads.
    assert "kubernetes.client.api.core_v1_api" in modules
    assert "kubernetes.client.api.apps_v1_api" not in modules
    assert "kubernetes.client.models.v1_node" not in modules
    assert len(modules) < 60, modules


def test_every_name_of_the_eager_packages_is_the_same_object_when_light() -> None:
    eager = json.loads(_python("import kubernetes\n" + DESCRIBE))
    light = json.loads(_python("import clusterscaler\n" + DESCRIBE))
    for package in PACKAGES:
        missing = sorted(eager[package].keys() - light[package].keys())
        assert not missing, f"{package}: {missing[:10]}"
        differ = {
            n: (eager[package][n], light[package][n])
            for n in eager[package]
            if eager[package][n] != light[package][n]
        }
        assert not differ, f"{package}: {dict(list(differ.items())[:5])}"
    assert len(eager["kubernetes.client.models"]) > 500


def test_an_init_that_is_not_only_imports_is_run_whole(tmp_path: Path) -> None:
    package = tmp_path / "odd_client"
    package.mkdir()
    (package / "widgets.py").write_text("class Widget:\n    pass\n")
    init = package / "__init__.py"
    init.write_text(
        "from odd_client.widgets import Widget\n"
        "if True:\n"
        "    LIMIT = 3\n"
    )
    assert imports_of(init.read_text(), "odd_client") is None
    sys.path.insert(0, str(tmp_path))
    try:
        module = light_package("odd_client", init)
        sys.modules["odd_client"] = module
        assert module.LIMIT == 3
        assert module.Widget.__name__ == "Widget"
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("odd_client", "odd_client.widgets"):
            sys.modules.pop(name, None)


def test_an_init_of_imports_names_each_source_and_its_submodules_stay_importable() -> None:
    read = imports_of(
        '"""Doc."""\n'
        "from __future__ import absolute_import\n"
        '__version__ = "1.2"\n'
        "from . import config\n"
        "from .client import ApiClient as Client\n"
        "from kubernetes.client.api.core_v1_api import CoreV1Api\n",
        "kubernetes",
    )
    import __future__

    assert read == (
        {"absolute_import": __future__.absolute_import, "__version__": "1.2"},
        {"config": "", "Client": "kubernetes.client",
         "CoreV1Api": "kubernetes.client.api.core_v1_api"},
    )
    assert imports_of("from .. import x\n", "a.b") is None
    assert imports_of("from m import *\n", "a") is None


def test_the_packages_constants_are_there_before_any_other_name_is_asked_for() -> None:
    out = _python("import clusterscaler, kubernetes; print(kubernetes.__version__)")
    from importlib.metadata import version

    assert out.strip() == version("kubernetes")


def test_an_unknown_name_is_an_attribute_error() -> None:
    out = _python(textwrap.dedent(
        """
        import clusterscaler, kubernetes.client as c
        try:
            c.NoSuchThing
        except AttributeError as e:
            print("AttributeError", e)
        print(hasattr(c, "V1Pod"), hasattr(c, "Nope"))
        """
    ))
    assert "AttributeError" in out and "NoSuchThing" in out
    assert out.strip().endswith("True False")

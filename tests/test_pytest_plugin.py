"""The pytest plugin, tested as users meet it: through pytester, against a real cluster."""

from __future__ import annotations

import pytest

INNER = """
import pytest

pytestmark = pytest.mark.cluster

def test_namespace_is_real_and_labelled(draguard_cluster, draguard_namespace):
    kube = draguard_cluster.kube()
    ns = kube.get("Namespace", draguard_namespace)
    assert ns["metadata"]["labels"]["draguard.dev/run"] == draguard_cluster.run_id
    assert kube.get("ServiceAccount", "default", draguard_namespace) is not None
    open("namespace.txt", "w").write(draguard_namespace)
"""


def test_plugin_registers_its_options_and_marker(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--draguard-cluster=*", "*--kubeconfig=*", "*--context=*"])
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["*@pytest.mark.cluster*"])


@pytest.mark.cluster
def test_kubeconfig_mode_gives_fixtures_on_an_existing_cluster_and_removes_the_namespace(
    pytester: pytest.Pytester, draguard_cluster  # type: ignore[no-untyped-def]
) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess(
        "--draguard-cluster=kubeconfig", f"--kubeconfig={draguard_cluster.kubeconfig}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    name = (pytester.path / "namespace.txt").read_text()
    ns = draguard_cluster.kube().get("Namespace", name)
    assert ns is None or ns["metadata"].get("deletionTimestamp"), "the test namespace must be removed afterwards"

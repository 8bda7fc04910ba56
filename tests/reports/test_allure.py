"""Allure: the pytest plugin attaches draguard evidence when allure-pytest records; Allure 3 renders `--report allure`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from draguard import reports
from report_samples import broken_result


INNER_RESULT = """
import sys
sys.path.insert(0, {samples!r})
from draguard.conformance.plugin import attach_result
from report_samples import broken_result

def test_a_run_is_attached():
    attach_result(broken_result())
"""

INNER_NAMESPACE = """
import pytest

pytestmark = pytest.mark.cluster

def test_uses_a_namespace(draguard_namespace):
    pass
"""


def _results(directory: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(p.read_text()) for p in directory.glob("*-result.json")]


def test_attach_result_adds_evidence_and_timeline_to_the_allure_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER_RESULT.format(samples=str(Path(__file__).parent)))
    alluredir = pytester.path / "allure"
    result = pytester.runpytest_subprocess(f"--alluredir={alluredir}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (test,) = _results(alluredir)
    (step,) = test["steps"]
    assert step["name"] == "draguard scenario gang-deadlock-per-pod: NOT met"
    names = {a["name"] for a in step["attachments"]}
    assert {"no-leak evidence", "gang-atomic evidence", "gang-deadlock-per-pod timeline"} <= names
    leak = next(a for a in step["attachments"] if a["name"] == "no-leak evidence")
    assert "claim leaky" in (alluredir / leak["source"]).read_text()


def test_without_alluredir_nothing_is_attached_and_nothing_breaks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER_RESULT.format(samples=str(Path(__file__).parent)))
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.cluster
def test_namespace_fixture_attaches_the_dra_state(pytester: pytest.Pytester, draguard_cluster) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_inner=INNER_NAMESPACE)
    alluredir = pytester.path / "allure"
    result = pytester.runpytest_subprocess("--draguard-cluster=kubeconfig", f"--kubeconfig={draguard_cluster.kubeconfig}",
                                           f"--alluredir={alluredir}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    containers = [json.loads(p.read_text()) for p in alluredir.glob("*-container.json")]
    steps = [s for c in containers for after in c.get("afters", []) for s in after.get("steps", [])]
    state = [s for s in steps if s["name"].startswith("draguard: state of namespace")]
    assert state, f"no state step in {[s['name'] for s in steps]}"
    assert {a["name"] for a in state[0]["attachments"]} == {"Pods", "ResourceClaims", "Events", "ResourceSlices"}


def test_allure3_renders_the_results_to_html(tmp_path: Path) -> None:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (Node.js): Allure 3 renders allure-results with `npx allure generate`")
    reports.render(broken_result(), tmp_path, ["allure"])
    out = tmp_path / "allure-report"
    try:
        proc = subprocess.run([npx, "--yes", "allure@3", "generate", str(tmp_path / "allure-results"), "-o", str(out)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.skip("npx could not fetch and run allure@3 within 300s (npm registry unreachable?)")
    if proc.returncode != 0 and ("ENOTFOUND" in proc.stderr or "EAI_AGAIN" in proc.stderr or "ECONNREFUSED" in proc.stderr):
        pytest.skip(f"npx could not fetch allure@3 from the npm registry: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    index = out / "index.html"
    assert index.is_file(), sorted(p.name for p in out.iterdir()) if out.exists() else "no output folder"

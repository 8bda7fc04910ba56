"""driver-down's DaemonSet patches on a real control plane: the exclusion and the restoring merge patch
(by the step, and the journaled patch alone as ``draguard cleanup`` replays it) give back the DaemonSet's
spec exactly, for a template whose node affinity has only preferred terms (the exclusion adds required
ones, which the restore must remove) and for one with required terms and a RollingUpdate with maxSurge.

The API server applies the merge patches and defaults the spec; the DaemonSet controller's current
revision after the restore is the original one (its hash), so nothing would roll. Every object carries
the run label and goes with the test's namespace."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

import pytest

from draguard.harness.fleet.installed import InstalledFleet
from draguard.harness.kube import RUN_LABEL, Kube

pytestmark = pytest.mark.cluster

PREFERRED = {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]}
REQUIRED = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}]}}


def _daemonset(name: str, tag: str, affinity: dict[str, Any], strategy: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "labels": {RUN_LABEL: tag}},
            "spec": {"selector": {"matchLabels": {"app": name}}, "updateStrategy": strategy,
                     "template": {"metadata": {"labels": {"app": name, RUN_LABEL: tag}},
                                  "spec": {"affinity": affinity, "containers": [
                                      {"name": "plugin", "image": "registry.k8s.io/pause:3.10.2"}]}}}}


def _current_hash(kube: Kube, ns: str, name: str, timeout: float = 20.0) -> str:
    """The hash of the DaemonSet's newest ControllerRevision (the controller's current one)."""
    deadline = time.monotonic() + timeout
    while True:
        revisions = [r for r in kube.request("GET", f"/apis/apps/v1/namespaces/{ns}/controllerrevisions").get("items") or []
                     if any(o.get("name") == name for o in r["metadata"].get("ownerReferences") or [])]
        ds = kube.get("DaemonSet", name, ns) or {}
        if revisions and (ds.get("status") or {}).get("observedGeneration") == ds["metadata"]["generation"]:
            newest = max(revisions, key=lambda r: r["revision"])
            return str(newest["metadata"]["labels"]["controller-revision-hash"])
        if time.monotonic() > deadline:
            raise AssertionError(f"the DaemonSet controller wrote no current revision of {ns}/{name} in {timeout:.0f}s")
        time.sleep(0.3)


@pytest.mark.parametrize("affinity, strategy", [
    ({"nodeAffinity": PREFERRED}, {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
    ({"nodeAffinity": {**PREFERRED, **REQUIRED}, "podAntiAffinity": {}},
     {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}),
], ids=["preferred-only", "required-and-max-surge"])
def test_the_daemonset_is_back_exactly_after_driver_down(draguard_cluster, affinity: Any, strategy: Any) -> None:  # type: ignore[no-untyped-def]
    kube = draguard_cluster.kube()
    tag = uuid.uuid4().hex[:8]
    ns = f"ds-restore-{tag}"
    kube.create_namespace(ns, {RUN_LABEL: tag})
    try:
        kube.create(_daemonset("plugin", tag, copy.deepcopy(affinity), strategy), ns)
        original = kube.get("DaemonSet", "plugin", ns)
        assert original is not None
        original_hash = _current_hash(kube, ns, "plugin")

        fleet = InstalledFleet()
        fleet.kube, fleet.daemonset = kube, original
        journal: list[tuple[str, dict[str, Any]]] = []
        fleet.exclude("w1", lambda kind, args: journal.append((kind, args)))
        excluded = kube.get("DaemonSet", "plugin", ns)
        assert excluded is not None and excluded["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert _current_hash(kube, ns, "plugin") != original_hash
        fleet.include("w1")
        assert (kube.get("DaemonSet", "plugin", ns) or {})["spec"] == original["spec"]
        assert _current_hash(kube, ns, "plugin") == original_hash

        # draguard cleanup after a crash mid driver-down: the journaled patch alone
        fleet.exclude("w1", lambda kind, args: journal.append((kind, args)))
        kind, args = journal[-1]
        assert kind == "patch-object"
        kube.patch(args["kind"], args["name"], args["patch"], args["namespace"], args["patchType"])
        assert (kube.get("DaemonSet", "plugin", ns) or {})["spec"] == original["spec"]
        assert _current_hash(kube, ns, "plugin") == original_hash
    finally:
        kube.delete("Namespace", ns)

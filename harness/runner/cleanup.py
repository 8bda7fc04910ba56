"""The last phases of a run.

**cleanup**: faults meant to last "until cleanup" are undone first (a driver left down comes back),
then the workloads are deleted; once consumers are gone and no driver has a call in flight (or the
cleanup timeout passed) the judge judges the ``after-cleanup`` invariants. A control-plane component
that died on its own makes the scenario an error.

**teardown**: the other faults undone, the watches stopped, every object with the run label deleted
(on a cluster draguard did not start), the fleet stopped, each fake node's device truth kept in the
run's record, the nodes' files removed, the cluster down.

**pruning records** (:func:`prune_records`, at the start of every run): a run's record waits in its
folder under the state directory for the reports to place it into a report directory. A run whose
result is never rendered (a benchmark's, a test's that reads only the result) leaves it there; once
such a folder is :data:`RECORDS_KEPT_FOR` old and its run has no journal (a run still going, or one
that crashed and waits for ``draguard cleanup``, has one), its record goes, and the folder with it
once empty.

Talks to: the run's handles (journal, undos, watches, record), the fleet, the judge, the cluster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable

from draguard.harness.core.errors import DraguardError, HarnessError
from draguard.harness.core.paths import runs_dir

from ..cluster.local import LocalCluster
from ..devices.truth import DeviceTruth
from ..driver.inflight import in_flight
from ..invariants import DeviceId, judged
from ..judge import Judge
from ..result import ScenarioResult, TimelineEvents
from .context import RunHandles
from .journal import delete_labelled, journal_dir

__all__ = ["undo", "cleanup", "teardown", "prune_records", "RECORDS_KEPT_FOR"]

RECORDS_KEPT_FOR = 24 * 3600.0
"""Seconds a finished run's record waits for a render before :func:`prune_records` removes it."""


def undo(h: RunHandles, until_cleanup: bool, log: Callable[[str], None]) -> None:
    """Run the in-process undos of one kind, newest first, journaling each as undone."""
    for u in [u for u in reversed(h.undo) if u.until_cleanup == until_cleanup]:
        h.undo.remove(u)
        try:
            u.fn()
            if u.seq:
                h.journal.undone(u.seq)
        except DraguardError as exc:
            log(f"undo failed: {exc}")


def cleanup(h: RunHandles, judge: Judge, timeout: float, result: ScenarioResult, log: Callable[[str], None]) -> None:
    """Delete the workloads, wait for their consumers to go (up to ``timeout`` seconds), judge the
    ``after-cleanup`` invariants; record in ``result`` the control-plane exits the cluster's keeper
    recovered from. Undo the until-cleanup faults before calling."""
    pods = [p["metadata"]["name"] for p in h.observer.objects("Pod")]
    for name, result in zip(pods, h.kube.bulk(lambda n: h.kube.delete("Pod", n, h.namespace), pods)):
        if isinstance(result, Exception):
            raise HarnessError(f"deleting pod {h.namespace}/{name}: {result}") from result

    def quiet() -> bool:
        if h.observer.objects("Pod"):
            return False
        if any((c.get("status") or {}).get("reservedFor") for c in h.observer.objects("ResourceClaim")):
            return False
        return (all(not judge.driver_state(n).prepared for n in h.fleet.drivers) and not judge.calls_in_flight()
                and not any(s.prepared for s in h.fleet.external_states()))

    deadline = time.monotonic() + timeout
    gone = h.observer.wait_for(quiet, timeout)
    # A prepare that outlived its caller (the kubelet gives up after 45 s) still completes and
    # changes the node: judge only once no driver has a call in flight (within the same timeout).

    while judge.calls_in_flight() and time.monotonic() < deadline:
        time.sleep(0.2)
    busy = {n: in_flight(p.plugin_dir) for n, p in h.fleet.drivers.items() if in_flight(p.plugin_dir)}
    _wait_republished(h, judge, log)
    h.observer.wait_quiet(quiet=1.0, timeout=5.0)
    log("consumers gone" if gone else f"consumers not gone after {timeout:.0f}s"
        + (f"; calls still in flight: {busy}" if busy else ""))
    judge.judge(judged("after-cleanup"))
    if h.cluster is not None and h.cluster.exits:  # started again by the cluster's keeper: evidence, not hidden
        result.environment["controlPlaneExits"] = list(h.cluster.exits)
        log("control-plane components exited on their own and were started again: "
            + "; ".join(e.splitlines()[0] for e in h.cluster.exits))
    dead = h.cluster.dead() if h.cluster is not None else []
    if dead:  # every step that stops a component starts it again: one that is down now died on its own
        raise HarnessError("the local control plane lost " + "; ".join(dead) + "\nwhat the run saw may be the "
                           "control plane's doing, not the driver's: the scenario is an error, not a verdict")


def _wait_republished(h: RunHandles, judge: Judge, log: Callable[[str], None]) -> None:
    """Give a driver that republishes its slices asynchronously (:attr:`Fleet.republish_grace`) the time to
    have its whole inventory published again before no-leak compares it; say how long it took."""
    grace = h.fleet.republish_grace
    if not grace or not judge.inventory:
        return

    def republished() -> bool:
        have = {DeviceId(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                for s in h.observer.objects("ResourceSlice") for d in s["spec"].get("devices") or []}
        return judge.inventory <= have

    t0 = time.monotonic()
    if republished():
        return
    back = h.observer.wait_for(republished, grace)
    log(f"the driver's devices published again after {time.monotonic() - t0:.0f}s" if back else
        f"the driver's devices not all published again after {grace:.0f}s")


def teardown(h: RunHandles | None, cluster: LocalCluster | None, result: ScenarioResult,
             log: Callable[[str], None]) -> None:
    """Undo what is left, stop the watches and end ``result``'s timeline, delete the run's objects on a
    cluster draguard did not start, stop the fleet, keep each node's device truth in the run's record,
    bring the cluster down."""
    if h is not None:
        undo(h, True, log)
        undo(h, False, log)
        h.observer.stop()
        # The timeline ends here: teardown's deletions are not part of what the scenario showed.
        result.timeline = TimelineEvents(tuple(h.timeline.events()))
        if cluster is None:  # a shared cluster: remove exactly what this run created
            delete_labelled(h.kube, h.run_id)
        h.fleet.stop()
        keep_device_truth(h)
        if os.environ.get("DRAGUARD_KEEP_LOGS") == "1":  # the node agents' and drivers' logs too
            log(f"kept the nodes' files (DRAGUARD_KEEP_LOGS=1): {h.node_root}")
        else:
            shutil.rmtree(h.node_root, ignore_errors=True)
    if cluster is not None:
        # DRAGUARD_KEEP_LOGS=1 keeps the control-plane logs of a run for debugging.
        cluster.down(remove=os.environ.get("DRAGUARD_KEEP_LOGS") != "1")


def keep_device_truth(h: RunHandles) -> None:
    """Copy each fake node's device truth into the run's record (``devices/<node>.json`` in the report)."""
    if h.record is None:
        return
    for node in h.fleet.drivers:
        src = DeviceTruth(h.node_root, node).path
        if src.exists():
            shutil.copyfile(src, h.record.path(f"devices/{node}.json", f"the device truth of node {node} at the end"))


def prune_records(older_than: float = RECORDS_KEPT_FOR) -> list[str]:
    """Remove the records no render took, of runs that ended ``older_than`` seconds ago or more, and the
    run folders left empty (see the module docstring); the run ids whose folder was looked at."""
    try:
        folders = list(runs_dir().iterdir())
    except OSError:
        return []
    now = time.time()
    pruned = []
    for folder in folders:
        if (journal_dir() / f"{folder.name}.jsonl").exists():
            continue  # running, or crashed: draguard cleanup comes first
        try:
            if now - folder.stat().st_mtime < older_than:
                continue
        except OSError:
            continue
        shutil.rmtree(folder / "record", ignore_errors=True)
        with contextlib.suppress(OSError):
            folder.rmdir()
        pruned.append(folder.name)
    return pruned

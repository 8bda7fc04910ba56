"""What the sanity suite may do to a driver beyond its sockets (see :class:`~.suite.DriverHooks`).

* :class:`CommandHooks`: ``restart`` runs a shell command (``--restart-command``), for any driver.
* :class:`FakeDriverHooks`: the fake driver's own fault file (slow prepare, slow or failing device
  release, a crash inside prepare, an unhealthy device) and a restart of its process; used by the
  suite's self-tests and by ``draguard sanity --fake-driver-root``.

A hook that cannot be done says so before any check starts (:meth:`unavailable` gives the reason),
and raises :class:`NotImplementedError` if called anyway; the checks needing it skip without starting.
Both learn the driver's node from the suite (:meth:`bind_node`): ``{node}`` in ``--restart-command``
is replaced by :func:`draguard.conformance.checks.restart_command`, as in the cluster suite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from draguard.harness.core.paths import DEFAULT_DRIVER
from draguard.harness.devices.truth import DeviceTruth, HardwareFault, HardwareFaultKind
from draguard.harness.core.fsio import atomic_write, damaged
from draguard.harness.driver.fault_control import Faults, clear_faults, set_faults
from draguard.harness.driver.state import checkpoint_path
from draguard.harness.grpcapi.plugin import ClaimRef

from ..checks import run_restart_command

__all__ = ["CommandHooks", "FakeDriverHooks"]


class CommandHooks:
    """``restart`` by running a shell command (``{node}`` replaced by the driver's node); nothing else."""

    def __init__(self, restart_command: str, timeout: float = 60.0, node: str | None = None) -> None:
        self.restart_command = restart_command
        self.timeout = timeout
        self.node = node

    def bind_node(self, node: str | None) -> None:
        """The node the suite found the driver on (kept when one was given)."""
        self.node = self.node or node

    def unavailable(self, name: str) -> str:
        if name == "restart" and "{node}" in self.restart_command and not self.node:
            return "--restart-command names {node} but the driver's node is not known (give --node)"
        return ""

    def restart(self) -> None:
        run_restart_command(self.restart_command, self.node, self.timeout)

    def clear(self) -> None:
        pass


class FakeDriverHooks:
    """Hooks of draguard's fake driver on ``root``/``node``; ``process`` (a FakeDriverProcess) enables restart."""

    def __init__(self, root: str | Path, node: str, driver: str = DEFAULT_DRIVER, process: Any = None) -> None:
        self.root = Path(root)
        self.node = node
        self.driver = driver
        self.process = process

    def _set(self, **faults: Any) -> None:
        set_faults(self.root, self.node, self.driver, **faults)

    def bind_node(self, node: str | None) -> None:
        bind = getattr(self.process, "bind_node", None)
        if callable(bind):
            bind(self.node or node)

    def unavailable(self, name: str) -> str:
        """Why hook ``name`` cannot be done on this fake driver ("" when it can)."""
        if name == "restart_with_corrupt_checkpoint":
            name = "restart"
        if name == "restart":
            if self.process is None:
                return ("the suite cannot restart this fake driver: it was not started by the suite's caller "
                        "(give --restart-command)")
            inner = getattr(self.process, "unavailable", None)
            return str(inner(name)) if callable(inner) else ""
        if name == "slow_release" and "reset_slow" not in Faults.model_fields:
            return "this fake driver has no reset_slow fault"
        return ""

    def restart(self) -> None:
        why = self.unavailable("restart")
        if why:
            raise NotImplementedError(why)
        self.process.restart()

    def slow_prepare(self, claim: ClaimRef, seconds: float) -> None:
        self._set(prepare_hang={"seconds": seconds, "claims": [claim.uid], "count": 1})

    def slow_release(self, device: str, seconds: float) -> None:
        if self.unavailable("slow_release"):
            raise NotImplementedError(self.unavailable("slow_release"))
        self._set(reset_slow={"seconds": seconds, "devices": [device], "count": 1})

    def fail_release(self, device: str) -> None:
        self._set(reset_fail={"count": 1, "devices": [device]})

    def crash_in_prepare(self) -> None:
        self._set(crash_at={"point": "prepare.after_started"})

    def make_unhealthy(self, device: str, message: str) -> None:
        self._set(unhealthy={"devices": [device], "message": message})

    def raise_hardware_fault(self, device: str, kind: HardwareFaultKind, xid: int | None = None) -> None:
        """The node's hardware raises ``kind`` on ``device`` (its device truth, which the driver reads
        through NVML)."""
        DeviceTruth(self.root, self.node).raise_fault(device, HardwareFault.of(kind, xid))

    def repair_hardware(self, device: str) -> None:
        DeviceTruth(self.root, self.node).repair(device)

    def restart_with_corrupt_checkpoint(self) -> None:
        """Kill the driver, truncate its checkpoint (a write cut short), start it again."""
        why = self.unavailable("restart")
        if why:
            raise NotImplementedError(why)
        path = checkpoint_path(self.root, self.node, self.driver)
        self.process.kill()
        atomic_write(path, damaged(path.read_bytes(), "truncated"))
        self.process.start()

    def device_sharing(self, device: str) -> str | None:
        rec = DeviceTruth(self.root, self.node).read().devices.get(device)
        return rec.sharing if rec is not None else None

    def device_reset_state(self, device: str) -> str | None:
        rec = DeviceTruth(self.root, self.node).read().devices.get(device)
        return rec.reset if rec is not None else None

    def clear(self) -> None:
        clear_faults(self.root, self.node, self.driver)

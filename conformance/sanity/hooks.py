"""What the sanity suite may do to a driver beyond its sockets (see :class:`~.suite.DriverHooks`).

* :class:`CommandHooks`: ``restart`` runs a shell command (``--restart-command``), for any driver.
* :class:`FakeDriverHooks`: the fake driver's own fault file (slow prepare, slow or failing device
  release, a crash inside prepare, an unhealthy device) and a restart of its process; used by the
  suite's self-tests and by ``draguard sanity --fake-driver-root``.

A hook that cannot be done raises :class:`NotImplementedError`; the checks needing it then skip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from draguard.harness.driver.faults import Faults, clear_faults, set_faults
from draguard.harness.grpcapi.plugin import ClaimRef
from draguard.harness.core.paths import DEFAULT_DRIVER

__all__ = ["CommandHooks", "FakeDriverHooks"]


class CommandHooks:
    """``restart`` by running a shell command; nothing else."""

    def __init__(self, restart_command: str, timeout: float = 60.0) -> None:
        self.restart_command = restart_command
        self.timeout = timeout

    def restart(self) -> None:
        done = subprocess.run(
            self.restart_command, shell=True, capture_output=True, text=True, timeout=self.timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"--restart-command exited with {done.returncode}: {(done.stderr or done.stdout).strip()[-400:]}"
            )

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

    def restart(self) -> None:
        if self.process is None:
            raise NotImplementedError("the fake driver was not started by the suite's caller (no process handle)")
        self.process.restart()

    def slow_prepare(self, claim: ClaimRef, seconds: float) -> None:
        self._set(prepare_hang={"seconds": seconds, "claims": [claim.uid], "count": 1})

    def slow_release(self, device: str, seconds: float) -> None:
        if "reset_slow" not in Faults.model_fields:
            raise NotImplementedError("this fake driver has no reset_slow fault")
        self._set(reset_slow={"seconds": seconds, "devices": [device], "count": 1})

    def fail_release(self, device: str) -> None:
        self._set(reset_fail={"count": 1, "devices": [device]})

    def crash_in_prepare(self) -> None:
        self._set(crash_at={"point": "prepare.after_started"})

    def make_unhealthy(self, device: str, message: str) -> None:
        self._set(unhealthy={"devices": [device], "message": message})

    def device_sharing(self, device: str) -> str | None:
        from draguard.harness.devices.truth import DeviceTruth

        rec = DeviceTruth(self.root, self.node).read().devices.get(device)
        return rec.sharing if rec is not None else None

    def device_reset_state(self, device: str) -> str | None:
        from draguard.harness.devices.truth import DeviceTruth

        rec = DeviceTruth(self.root, self.node).read().devices.get(device)
        return rec.reset if rec is not None else None

    def clear(self) -> None:
        clear_faults(self.root, self.node, self.driver)

"""The fake driver's only way to change device truth: a narrow, NVML-like interface.

A real GPU driver resets a device (``nvmlDeviceResetGpuLockedClocks``/``nvidia-smi -r``), creates
and destroys MIG instances (``nvmlDeviceCreateGpuInstance``), and sets up sharing (the compute
mode for time-slicing, an MPS control daemon). :class:`FakeNvml` offers exactly those on the
node's :class:`~.truth.DeviceTruth`; everything else about the hardware (which containers run,
what memory they use) belongs to the container runtime, not the driver.

Like NVML, a reset of a device with processes on it fails (``NVML_ERROR_IN_USE``), and a reset
can fail for hardware reasons: the fault hook ``reset_fails(device)`` (the driver's fault
control) decides that, as a flaky board would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import StampedReads
from .truth import DeviceTruth, InstalledDevice, _Draft

__all__ = ["NvmlError", "FakeNvml", "SHARING_STRATEGIES"]

SHARING_STRATEGIES = ("TimeSlicing", "MPS")


class NvmlError(HarnessError):
    """An NVML call failed; the message says why, as ``nvmlErrorString`` would."""


class FakeNvml:
    """NVML-like calls on one node's device truth."""

    def __init__(self, truth: DeviceTruth, reset_fails: Callable[[str], bool] | None = None) -> None:
        self.truth = truth
        self.reset_fails = reset_fails or (lambda device: False)
        self._health: StampedReads[None, dict[str, str]] = StampedReads()
        """Devices reported unhealthy, read again when the truth file changed (:meth:`unhealthy`)."""

    def install(self, devices: Sequence[InstalledDevice]) -> None:
        """Make sure the devices exist (a driver started without the runner: the machine is as found)."""
        self.truth.install(devices)

    def device_paths(self) -> dict[str, str]:
        """Device name -> its device node on the host (what a CDI spec hands to a container)."""
        return {n: d.dev_path for n, d in self.truth.read().devices.items()}

    def unhealthy(self) -> dict[str, str]:
        """Devices the hardware reports unhealthy, with its message (what a health check polls every
        second; the truth file is read again only when it changed)."""
        def read() -> dict[str, str]:
            return {n: d.health_message or "unhealthy" for n, d in self.truth.read().devices.items()
                    if d.health == "unhealthy"}  # fmt: skip

        return dict(self._health.get(None, (self.truth.path,), read))

    def reset(self, device: str) -> None:
        """Reset and drain ``device``; NvmlError when it is in use or the reset fails."""

        def change(draft: _Draft) -> str:
            rec = draft.get(device)
            if rec.containers:
                pods = sorted({c.pod for c in rec.containers})
                draft.incident("reset-in-use", device,
                               f"reset of {device} attempted while {len(rec.containers)} container(s) of "
                               f"{', '.join(pods)} run on it", rec.running_claims)  # fmt: skip
                return f"NVML_ERROR_IN_USE: {device} has {len(rec.containers)} process(es) running"
            if self.reset_fails(device):
                message = f"reset of device {device} failed (injected)"
                draft.put(replace(rec, reset="failed", reset_error=message, health="unhealthy",
                                  health_message=message))  # fmt: skip
                return message
            draft.put(replace(rec, reset="clean", reset_error="", used_by=(), health="healthy", health_message=""))
            return ""

        error: str = self.truth.update(change)
        if error:
            raise NvmlError(error)

    def create_partition(self, parent: str, partition: str) -> None:
        """Create MIG-like instance ``partition`` on ``parent``."""

        def change(draft: _Draft) -> None:
            rec = draft.get(parent)
            if partition not in rec.partitions:
                draft.put(replace(rec, partitions=rec.partitions + (partition,)))

        self.truth.update(change)

    def destroy_partition(self, parent: str, partition: str) -> None:
        def change(draft: _Draft) -> None:
            rec = draft.get(parent)
            draft.put(replace(rec, partitions=tuple(p for p in rec.partitions if p != partition)))

        self.truth.update(change)

    def configure_sharing(self, device: str, strategy: str | None, claim: str | None = None) -> None:
        """Set (``TimeSlicing``/``MPS``, for ``claim``) or clear (None) the device's sharing."""
        if strategy is not None and strategy not in SHARING_STRATEGIES:
            raise NvmlError(f"sharing strategy {strategy!r} is not supported; known: {', '.join(SHARING_STRATEGIES)}")

        def change(draft: _Draft) -> None:
            rec = draft.get(device)
            draft.put(replace(rec, sharing=strategy, sharing_claim=claim if strategy else None))

        self.truth.update(change)

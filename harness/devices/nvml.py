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
from .truth import APPLICATION_XIDS, DeviceRecord, DeviceTruth, InstalledDevice, _Draft

__all__ = ["NvmlError", "FakeNvml", "SHARING_STRATEGIES"]

SHARING_STRATEGIES = ("TimeSlicing", "MPS")


class NvmlError(HarnessError):
    """An NVML call failed; the message says why, as ``nvmlErrorString`` would."""


class FakeNvml:
    """NVML-like calls on one node's device truth."""

    def __init__(self, truth: DeviceTruth, reset_fails: Callable[[str], bool] | None = None) -> None:
        self.truth = truth
        self.reset_fails = reset_fails or (lambda device: False)
        self._health: StampedReads[frozenset[int], dict[str, str]] = StampedReads()
        """Devices reported unhealthy, read again when the truth file changed (:meth:`unhealthy`)."""

    def install(self, devices: Sequence[InstalledDevice]) -> None:
        """Make sure the devices exist (a driver started without the runner: the machine is as found)."""
        self.truth.install(devices)

    def device_paths(self) -> dict[str, str]:
        """Device name -> its device node on the host (what a CDI spec hands to a container)."""
        return {n: d.dev_path for n, d in self.truth.read().devices.items()}

    def unhealthy(self, skip_xids: frozenset[int] = APPLICATION_XIDS) -> dict[str, str]:
        """A health check over what NVML reports, as NVIDIA's device plugin does it (NVIDIA/k8s-device-plugin
        internal/rm/health.go): a device NVML cannot reach (``NVML_ERROR_GPU_IS_LOST``: fallen off the
        bus), one that raised an Xid not in ``skip_xids`` (the application errors, after which the GPU still
        works), one with uncorrectable ECC errors, and one whose health the hardware reports bad otherwise;
        each with its message. Polled every second; the truth file is read again only when it changed."""
        def read() -> dict[str, str]:
            out = {}
            for n, d in self.truth.read().devices.items():
                critical = [x for x in d.xids if x not in skip_xids]
                if d.lost:
                    out[n] = d.health_message or "GPU is lost: it has fallen off the bus"
                elif critical:
                    out[n] = d.health_message or f"Xid {critical[-1]}"
                elif d.ecc_uncorrected:
                    out[n] = d.health_message or f"{d.ecc_uncorrected} uncorrectable ECC error(s)"
                elif d.health == "unhealthy":
                    out[n] = d.health_message or "unhealthy"
            return out

        return dict(self._health.get(skip_xids, (self.truth.path,), read))

    def xid_events(self, device: str) -> tuple[int, ...]:
        """The Xid errors ``device`` raised since its repair (``nvmlEventSetWait`` with
        ``nvmlEventTypeXidCriticalError``, all of them kept)."""
        return self._record(device).xids

    def ecc_uncorrected(self, device: str) -> int:
        """``nvmlDeviceGetTotalEccErrors(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)``."""
        return self._record(device).ecc_uncorrected

    def _record(self, device: str) -> DeviceRecord:
        rec = self.truth.read().devices.get(device)
        if rec is None:
            raise NvmlError(f"{device}: not found (NVML_ERROR_NOT_FOUND)")
        if rec.lost:
            raise NvmlError(f"{device}: GPU is lost (NVML_ERROR_GPU_IS_LOST)")
        return rec

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
            if rec.lost:  # a GPU fallen off the bus answers nothing, a reset included, until it is repaired
                message = f"reset of device {device} failed: GPU is lost (NVML_ERROR_GPU_IS_LOST)"
                draft.put(replace(rec, reset="failed", reset_error=message))
                return message
            if self.reset_fails(device):
                message = f"reset of device {device} failed (injected)"
                draft.put(replace(rec, reset="failed", reset_error=message, health="unhealthy",
                                  health_message=message))  # fmt: skip
                return message
            # A reset clears what the GPU raised (its Xids, its volatile ECC count) and its health.
            draft.put(replace(rec, reset="clean", reset_error="", used_by=(), health="healthy", health_message="",
                              xids=(), ecc_uncorrected=0))
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

"""The probe protocol: what a node's accelerators report about themselves, for fake and real nodes alike.

A probe answers one question, :meth:`DeviceProbe.probe`: every device with its uuid, memory (total
and used), the compute processes on it (pid and memory) and its MIG devices. Two implementations:

- :class:`FakeProbe` reads a fake node's :class:`~.truth.DeviceTruth` (containers are processes;
  partitions are MIG devices);
- :class:`NvmlProbe` asks NVML through ``pynvml`` (package ``nvidia-ml-py``), on a real GPU node.

A probe never raises for a missing library, a machine without an NVIDIA driver or without GPUs: it
returns a :class:`ProbeResult` whose ``status`` says so (``no-library``, ``no-driver``,
``no-devices``, ``error``) with a sentence for a human. ``draguard nvml-probe`` prints it.

The NVML calls (as pynvml makes them): ``nvmlInitWithFlags``, ``nvmlSystemGetDriverVersion``,
``nvmlDeviceGetCount_v2``, ``nvmlDeviceGetHandleByIndex_v2``, ``nvmlDeviceGetName``,
``nvmlDeviceGetUUID``, ``nvmlDeviceGetMemoryInfo``, ``nvmlDeviceGetComputeRunningProcesses_v3``,
``nvmlDeviceGetMigMode``, ``nvmlDeviceGetMaxMigDeviceCount``,
``nvmlDeviceGetMigDeviceHandleByIndex``, ``nvmlShutdown`` and ``nvmlErrorString``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .truth import DeviceTruth

__all__ = ["ProbeStatus", "ProbedProcess", "ProbedDevice", "ProbeResult", "DeviceProbe", "FakeProbe", "NvmlProbe"]

ProbeStatus = Literal["ok", "no-library", "no-driver", "no-devices", "error"]


@dataclass(frozen=True)
class ProbedProcess:
    pid: int
    memory_bytes: int | None
    """None where NVML cannot tell (``NVML_VALUE_NOT_AVAILABLE``)."""


@dataclass(frozen=True)
class ProbedDevice:
    name: str
    uuid: str
    index: int | None = None
    memory_total: int = 0
    memory_used: int = 0
    processes: tuple[ProbedProcess, ...] = ()
    mig_enabled: bool = False
    mig_devices: tuple[ProbedDevice, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "uuid": self.uuid,
            "index": self.index,
            "memoryTotal": self.memory_total,
            "memoryUsed": self.memory_used,
            "processes": [{"pid": p.pid, "memory": p.memory_bytes} for p in self.processes],
            "migEnabled": self.mig_enabled,
            "migDevices": [m.as_dict() for m in self.mig_devices],
        }


@dataclass(frozen=True)
class ProbeResult:
    status: ProbeStatus
    message: str
    devices: tuple[ProbedDevice, ...] = ()
    driver_version: str = ""
    source: str = ""
    """Where the answer came from: ``nvml:<library>`` or ``truth:<file>``."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "source": self.source,
                "driverVersion": self.driver_version, "devices": [d.as_dict() for d in self.devices]}  # fmt: skip

    def render(self) -> str:
        """Lines for a terminal."""
        lines = [f"{self.status}: {self.message}"]
        if self.driver_version:
            lines.append(f"driver version {self.driver_version} ({self.source})")
        for d in self.devices:
            lines.append(_line(d, ""))
            for m in d.mig_devices:
                lines.append(_line(m, "  "))
        return "\n".join(lines)


def _line(d: ProbedDevice, indent: str) -> str:
    head = f"{indent}{d.index if d.index is not None else '-'} {d.name} {d.uuid}"
    mem = f"memory {d.memory_used // 2**20}/{d.memory_total // 2**20} MiB"
    procs = ", ".join(f"pid {p.pid}" + (f" ({p.memory_bytes // 2**20} MiB)" if p.memory_bytes is not None else "")
                      for p in d.processes) or "no processes"  # fmt: skip
    mig = " MIG on" if d.mig_enabled else ""
    return f"{head}: {mem}; {procs}{mig}"


class DeviceProbe(Protocol):
    def probe(self) -> ProbeResult: ...


class FakeProbe:
    """A fake node's devices, as its device truth reports them."""

    def __init__(self, truth: DeviceTruth) -> None:
        self.truth = truth

    def probe(self) -> ProbeResult:
        t = self.truth.read()
        if not t.devices:
            return ProbeResult("no-devices", f"node {self.truth.node}: no device is installed", source=f"truth:{self.truth.path}")
        out = []
        parents = [r for r in t.devices.values() if r.parent is None]
        for i, rec in enumerate(sorted(parents, key=lambda r: r.name)):
            migs = tuple(
                ProbedDevice(p, t.devices[p].uuid, None, t.devices[p].memory_total, t.devices[p].memory_used,
                             tuple(ProbedProcess(c.pid, c.memory_bytes) for c in t.devices[p].containers))
                for p in rec.partitions if p in t.devices
            )  # fmt: skip
            out.append(
                ProbedDevice(rec.name, rec.uuid, i, rec.memory_total,
                             rec.memory_used + sum(m.memory_used for m in migs),
                             tuple(ProbedProcess(c.pid, c.memory_bytes) for c in rec.containers),
                             bool(migs), migs)  # fmt: skip
            )
        return ProbeResult("ok", f"{len(out)} device(s) on fake node {self.truth.node}", tuple(out),
                           source=f"truth:{self.truth.path}")  # fmt: skip


class NvmlProbe:
    """A real node's GPUs through NVML (``pynvml``).

    ``library``: a path to load instead of the system's ``libnvidia-ml.so.1`` (pynvml keeps the
    loaded library in ``pynvml.nvmlLib``; the first library loaded in a process is the one used).
    """

    def __init__(self, library: str | None = None) -> None:
        self.library = library

    def probe(self) -> ProbeResult:
        try:
            import pynvml  # type: ignore[import-untyped]  # optional at run time: only where NVML is probed
        except ImportError as exc:  # the dependency is declared; a broken install still gets a clear answer
            return ProbeResult("no-library", f"pynvml (nvidia-ml-py) is not installed: {exc}")
        source = f"nvml:{self.library or 'libnvidia-ml.so.1'}"
        if self.library is not None and pynvml.nvmlLib is None:
            try:
                pynvml.nvmlLib = ctypes.CDLL(self.library)
            except OSError as exc:
                return ProbeResult("no-library", f"cannot load the NVML library {self.library}: {exc}", source=source)
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                return ProbeResult("no-library", "no NVML library (libnvidia-ml.so.1) on this machine: the NVIDIA "
                                   "driver is not installed, so there are no GPUs to probe", source=source)  # fmt: skip
            if code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
                return ProbeResult("no-driver", "the NVIDIA kernel driver is not loaded", source=source)
            return ProbeResult("error", f"NVML initialisation failed: {exc}", source=source)
        try:
            return self._devices(pynvml, source)
        except pynvml.NVMLError as exc:
            return ProbeResult("error", f"NVML call failed: {exc}", source=source)
        finally:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    def _devices(self, nvml: Any, source: str) -> ProbeResult:
        version = _text(nvml.nvmlSystemGetDriverVersion())
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return ProbeResult("no-devices", "NVML sees no GPU on this machine", driver_version=version, source=source)
        out = []
        for i in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            mig_enabled = False
            migs: list[ProbedDevice] = []
            try:
                current, _pending = nvml.nvmlDeviceGetMigMode(handle)
                mig_enabled = current == nvml.NVML_DEVICE_MIG_ENABLE
            except nvml.NVMLError as exc:
                if exc.value != nvml.NVML_ERROR_NOT_SUPPORTED:
                    raise
            if mig_enabled:
                for j in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                    try:
                        mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
                    except nvml.NVMLError as exc:
                        if exc.value == nvml.NVML_ERROR_NOT_FOUND:  # an empty slot
                            continue
                        raise
                    migs.append(self._device(nvml, mig, None))
            out.append(self._device(nvml, handle, i, mig_enabled, tuple(migs)))
        return ProbeResult("ok", f"{count} GPU(s) seen by NVML", tuple(out), version, source)

    @staticmethod
    def _device(nvml: Any, handle: Any, index: int | None, mig: bool = False,
                migs: tuple[ProbedDevice, ...] = ()) -> ProbedDevice:  # fmt: skip
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        procs = tuple(ProbedProcess(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                      for p in nvml.nvmlDeviceGetComputeRunningProcesses_v3(handle))  # fmt: skip
        return ProbedDevice(_text(nvml.nvmlDeviceGetName(handle)), _text(nvml.nvmlDeviceGetUUID(handle)), index,
                            int(memory.total), int(memory.used), procs, mig, migs)  # fmt: skip


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

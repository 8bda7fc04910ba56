"""Device truth: the state of each node's accelerators as the hardware and NVML see it.

    truth.py   the per-node truth file (health, reset state, containers, memory and processes,
               partitions, sharing, incidents); the container runtime's side of it
    nvml.py    the fake driver's only way to change it: reset, partition, configure sharing
    probe.py   the probe protocol: a fake node's truth or a real node's NVML (pynvml)

The fake driver (through ``nvml``), the fake node agent (as container runtime) and the runner
(reading, for the invariants) share one file per node; see :mod:`.truth`.
"""

from __future__ import annotations

from .truth import DeviceRecord, DeviceTruth, Incident, InstalledDevice, NodeTruth, installed_devices

__all__ = ["DeviceTruth", "NodeTruth", "DeviceRecord", "Incident", "InstalledDevice", "installed_devices"]

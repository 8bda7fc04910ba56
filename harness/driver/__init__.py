"""The fake DRA driver: a kubelet plugin that simulates a node's accelerators, written in Python.

One process per node serves the kubelet DRA gRPC service (v1 and v1beta1), plugin registration and
the health stream (v1 and v1alpha1) on unix sockets (protocol names and the client:
:mod:`draguard.harness.grpcapi.plugin`), publishes the node's ResourceSlices, and keeps a crash-safe
checkpoint of prepared claims. Faults are switched on and off from another process through a file;
mutants reproduce known driver bugs so that the conformance suite can be shown to catch them.

    topology.py  node topology files and presets  -> Inventory (devices, counter sets)
    slices.py    Inventory -> v1 ResourceSlices, published through Kube
    state.py     device and claim records, the checkpoint (atomic write), leak checks
    (CDI specs: one per prepared claim, written with draguard.harness.cdi; the devices themselves
    are changed only through draguard.harness.devices.nvml: reset, partitions, sharing)
    fault_control.py  fault control read from faults.json
    mutants.py   registry of known-bug modes
    plugin.py    prepare / unprepare logic on top of state, CDI, NVML, faults and mutants
    service.py   gRPC servicers and the two unix-socket servers
    process.py   run the driver as a subprocess (node agent, runner, tests)

Only the light modules are imported here; ``service`` and ``process`` import grpc and are
imported by whoever needs them.
"""

from __future__ import annotations

from .state import Checkpoint, ClaimState, DeviceState, read_checkpoint

__all__ = ["Checkpoint", "ClaimState", "DeviceState", "read_checkpoint"]

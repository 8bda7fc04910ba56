"""``device-taint``: a DeviceTaintRule with NoExecute on one device (a GPU fell off the bus).

The device-taint-eviction controller deletes pods whose claims use the device and do not tolerate
the taint; the gang must then be all gone or all re-bound, and nothing may leak.
"""

from __future__ import annotations

from typing import Literal

from draguard.harness.core.errors import UsageError
from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.deploy import RUN_LABEL
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.format import Params


class DeviceTaintParams(Params):
    key: str = "draguard.dev/unhealthy"
    """Taint key."""
    value: str = "xid-79"
    """Taint value."""
    effect: Literal["NoSchedule", "NoExecute", "None"] = "NoExecute"
    """``NoSchedule`` or ``NoExecute``."""


@FAULTS.register("device-taint", summary="taint one allocated device with a DeviceTaintRule", params=DeviceTaintParams)
def device_taint(ctx: StepContext, params: DeviceTaintParams | None) -> None:
    params = params or DeviceTaintParams()
    t = ctx.target
    if t.device and t.node:
        driver, pool, device = ctx.driver_name, t.node, t.device
    else:
        pods = ctx.target_pods(bound_only=True)
        devices = sorted({d for p in pods for d in ctx.allocated_devices(p)})
        if not devices:
            raise UsageError(f"step {ctx.step.name}: the target {t} holds no allocated device to taint")
        driver, pool, device = ctx.rng.choice(devices)
    name = f"{ctx.run_id}-{ctx.step.index}-{device}"[:63]
    ctx.before(UndoAction("delete-object", {"kind": "DeviceTaintRule", "name": name}))
    ctx.kube.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": name, "labels": {RUN_LABEL: ctx.run_id}},
        "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                 "taint": {"key": params.key, "value": params.value, "effect": params.effect}},
    })

    def untaint() -> None:
        ctx.kube.delete("DeviceTaintRule", name)

    ctx.on_undo(untaint)
    ctx.fired()
    ctx.note(f"tainted {driver}/{pool}/{device} {params.key}={params.value}:{params.effect}")

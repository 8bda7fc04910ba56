"""``checkpoint-corrupt``: the fake driver's checkpoint on a node is damaged while the driver is down.

The driver is killed, its checkpoint truncated (``mode: truncated``, the first half kept: a write cut
short) or garbled (``mode: garbled``: a run of bytes in the middle overwritten with bytes that are not
UTF-8), and the driver started again. The original is journaled before the file is touched, so
``draguard cleanup`` can put it back. A correct driver starts, says so, and rebuilds its books from the
API; one that refuses to start crash-loops (kubernetes-sigs/dra-driver-nvidia-gpu#1100), one that
starts afresh in silence forgets the claims it had prepared.

Talks to the fake driver's process and files through :class:`StepContext`.
"""

from __future__ import annotations

from typing import Literal

from draguard.harness.core.errors import HarnessError
from draguard.harness.core.fsio import atomic_write, damaged
from draguard.harness.core.registry import FAULTS
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction
from draguard.harness.scenario.format import Params


class CheckpointCorruptParams(Params):
    mode: Literal["truncated", "garbled"] = "truncated"
    """``truncated``: the first half of the file is kept; ``garbled``: 16 bytes in the middle are overwritten."""


@FAULTS.register("checkpoint-corrupt", summary="damage the fake driver's checkpoint (truncated or garbled) while it is "
                 "down, then start it", params=CheckpointCorruptParams, needs=("fake-driver",))  # fmt: skip
def checkpoint_corrupt(ctx: StepContext, params: CheckpointCorruptParams | None) -> None:
    params = params or CheckpointCorruptParams()
    for node in ctx.target_nodes():
        driver = ctx.fake_driver(node)
        driver.kill()
        path = driver.checkpoint
        try:
            original = path.read_bytes()
        except FileNotFoundError:
            driver.start()
            raise HarnessError(f"step {ctx.step.name}: the driver on {node} has written no checkpoint yet ({path}); "
                               "run the step once it prepared a claim (a when: condition)") from None  # fmt: skip
        ctx.before(UndoAction("write-file", {"path": str(path), "content": original.decode()}))
        atomic_write(path, damaged(original, params.mode, 0.25 + ctx.rng.random() / 2))
        ctx.fired()
        driver.start()
        ctx.note(f"checkpoint of the driver on {node} {params.mode} ({len(original)} bytes) while it was down; "
                 "driver started again")  # fmt: skip

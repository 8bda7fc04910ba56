"""``node-reboot``: a node loses what lives in memory and on tmpfs, and keeps what is on disk.

On the targeted node the DRA driver is killed, the volatile directories are emptied (the CDI spec
directory, ``/var/run/cdi`` on a real node, and the driver's plugin sockets) and every container is
gone (the container runtime's state lives under ``/run``); the persistent ones stay (the driver's
checkpoint under the plugins directory and the node agent's own checkpoint). The driver starts again,
then the node agent: the kubelet prepares the claims of every pod it runs again and creates their
containers afresh, which resolves their CDI devices against the directory as the driver left it
(kubernetes/kubernetes PR #141966 documents the re-prepare; kubernetes/kubernetes#141433 is what a
driver that answers from its checkpoint without writing the spec causes).

Fake nodes and hollow kubelets (node capability ``restart``); draguard's fake driver, whose files are
on this machine. The fake node agent is one process for every fake node: it restarts as a whole, the
containers of the other nodes kept. Talks to the node's directories, the device truth (a fake node's
containers), the fake driver's process and the node agents through :class:`StepContext`.
"""

from __future__ import annotations

import time
from pathlib import Path

from draguard.harness.core.registry import FAULTS
from draguard.harness.devices.truth import DeviceTruth
from draguard.harness.runner.context import StepContext
from draguard.harness.runner.journal import UndoAction


def _wipe(paths: list[Path]) -> int:
    removed = 0
    for path in paths:
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


@FAULTS.register("node-reboot", summary="reboot a node: its driver restarts, CDI specs, sockets and containers are gone, "
                 "checkpoints stay, and the node agent prepares its pods' claims again",
                 needs=("fake-driver", "fake-nodes", "kill-node"), node_capability="restart")  # fmt: skip
def node_reboot(ctx: StepContext, params: None) -> None:
    nodes = ctx.target_nodes()
    agents = {n.name: n.agent for n in ctx.scenario.nodes}
    for node in nodes:
        driver = ctx.fake_driver(node)
        driver.kill()
        dirs = ctx.node_dirs(node)
        ctx.before(UndoAction("none", {"why": f"the CDI specs and sockets of {node} are volatile: its driver writes "
                                              "them again, and the node's directories go at teardown"}))  # fmt: skip
        dirs.booted.write_text(f"{time.time()}\n")  # before the wipe: whoever sees the folder empty sees this
        specs = sorted(dirs.cdi.glob("*")) if dirs.cdi.is_dir() else []
        wiped = _wipe([p for p in specs if p.is_file()])
        sockets = _wipe(driver.sockets)
        stopped = 0
        truth = DeviceTruth(dirs.root, node)
        if agents.get(node, "fake") == "fake" and truth.exists:
            # A hollow kubelet's runtime forgets its containers when it restarts (and its feed tells the
            # truth); the fake agent's runtime is the device truth itself.
            pods = {c.id.split("/", 1)[0] for rec in truth.read().devices.values() for c in rec.containers}
            for uid in sorted(pods):
                truth.stop_containers(uid)
            stopped = len(pods)
        driver.start()
        ctx.fired()
        ctx.note(f"{node} rebooted: driver killed, {wiped} CDI spec file(s) and {sockets} socket(s) removed, "
                 f"containers of {stopped} pod(s) gone; driver started again")  # fmt: skip
    ctx.restart_node_agents(kill=True, nodes=nodes)
    ctx.note(f"node agent of {', '.join(nodes)} restarted")

"""``driver-calls``'s floor: the fastest a DRA kubelet plugin written in Python answers, measured beside the drivers.

The benchmark compares the fake driver (Python) with the upstream test driver (Go). Part of any
Python driver's latency is the price of serving gRPC from Python at all: grpcio's server, the
interpreter, the GIL. This server pays only that price and the API read every prepare needs, so its
latency is a lower bound for every Python driver on this machine, the fake one included:

- ``NodePrepareResources``: for each claim, one GET of the ResourceClaim (the same :class:`~.kube.Kube`
  client the fake driver uses), the UID checked, the allocation's devices of this driver returned;
  no checkpoint, no CDI spec, no device touched;
- ``NodeUnprepareResources``: success for every claim, nothing done.

A synchronous ``grpc.server`` with a pool of 16 threads, so concurrent calls overlap their API reads as
they do in a driver (the pool hop costs no latency here: an empty handler answered in 0.47-0.53 ms
this way and in 0.48-0.55 ms as a coroutine on grpc.aio's loop, measured side by side on this
machine). Only DRA v1 is served, on one socket; the benchmark calls it without registration.

Child entry point: ``python -m draguard.harness.bench.floor --kubeconfig K --socket S --driver D``;
SIGTERM stops it (exit 0).

Talks to: the API server (GET of ResourceClaims).
"""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from draguard.harness.core.process import NodeProcess, Supervised, child_main, socket_accepts, stop_on_signals
from draguard.harness.grpcapi import dra_v1_pb2, dra_v1_pb2_grpc
from draguard.harness.kube import Kube

__all__ = ["FloorServer", "serve", "main"]


class _Floor:
    """The DRA v1 servicer (duck-typed as ``dra_v1_pb2_grpc.DRAPluginServicer``)."""

    def __init__(self, kube: Any, driver: str) -> None:
        self.kube, self.driver, self.pb = kube, driver, dra_v1_pb2

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        resp = self.pb.NodePrepareResourcesResponse()
        for c in request.claims:
            entry = resp.claims[c.uid]
            obj = self.kube.get("ResourceClaim", c.name, c.namespace)
            if obj is None or obj["metadata"].get("uid") != c.uid:
                entry.error = f"ResourceClaim {c.namespace}/{c.name} with UID {c.uid} not found"
                continue
            results = ((obj.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
            for r in results:
                if r.get("driver") == self.driver:
                    entry.devices.add(request_names=[r.get("request", "")], pool_name=r.get("pool", ""),
                                      device_name=r.get("device", ""))  # fmt: skip
        return resp

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        resp = self.pb.NodeUnprepareResourcesResponse()
        for c in request.claims:
            resp.claims[c.uid].error = ""
        return resp


def serve(kubeconfig: Path, socket: Path, driver: str) -> None:
    """Serve the floor on ``socket`` until SIGTERM or SIGINT."""
    kube = Kube.from_kubeconfig(kubeconfig, pool_size=16)
    socket.parent.mkdir(parents=True, exist_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="floor"))
    dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(_Floor(kube, driver), server)
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    stop = threading.Event()
    with stop_on_signals(stop.set):
        while not stop.wait(0.5):
            pass
    server.stop(1.0).wait()


class FloorServer(NodeProcess):
    """The floor server as a supervised child process (``with FloorServer(...) as floor: floor.socket``)."""

    def __init__(self, kubeconfig: Path, root: Path, driver: str) -> None:
        self._socket = root / "floor.sock"
        argv = [sys.executable, "-m", "draguard.harness.bench.floor", "--kubeconfig", str(kubeconfig),
                "--socket", str(self._socket), "--driver", driver]  # fmt: skip
        self._proc = Supervised("Python floor server", argv, root / "floor.log", lambda: socket_accepts(self._socket))

    @property
    def socket(self) -> Path:
        return self._socket


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m draguard.harness.bench.floor")
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--socket", type=Path, required=True)
    p.add_argument("--driver", required=True)
    args = p.parse_args(argv)
    serve(args.kubeconfig, args.socket, args.driver)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(main))

"""The node's DRA manager against a real plugin on a unix socket: registration, batching, checkpoint."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from draguard.harness.nodes.checkpoint import Checkpoint
from draguard.harness.nodes.manager import DraManager, PodClaim, PrepareError
from draguard.harness.grpcapi.plugin import ClaimRef
from draguard.harness.nodes.plugins import NodePlugins
from draguard.harness.nodes.stubplugin import StubPlugin
from draguard.harness.core.paths import NodeDirs

DRIVER = "gpu.draguard.dev"


def claim(name: str, *drivers: str) -> PodClaim:
    return PodClaim(ClaimRef(namespace="ns", name=name, uid=f"uid-{name}"), drivers or (DRIVER,))


def registered(root: Path, node: str = "n1", drivers: tuple[str, ...] = (DRIVER,)) -> NodePlugins:
    dirs = NodeDirs(root, node).create()
    plugins = NodePlugins(node, dirs.registry, call_timeout=5.0)
    deadline = time.monotonic() + 5
    with ThreadPoolExecutor(2) as pool:
        while plugins.drivers() != sorted(drivers):
            assert time.monotonic() < deadline, f"{drivers} never registered"
            plugins.scan(pool.submit)
            time.sleep(0.05)
    return plugins


def manager(root: Path, plugins: NodePlugins, node: str = "n1") -> DraManager:
    return DraManager(node, plugins, NodeDirs(root, node).base)


def test_a_plugin_is_registered_from_its_registration_socket_and_told_so(root: Path) -> None:
    with StubPlugin(root, "n1") as plugin:
        plugins = registered(root)
        assert plugins.drivers() == [DRIVER]
        assert plugins.client(DRIVER).version == "v1.DRAPlugin"
        assert plugin.registrations == [(True, "")]


def test_the_first_supported_version_of_the_plugin_is_chosen(root: Path) -> None:
    with StubPlugin(root, "n1", versions=("v9.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAPlugin")):
        assert registered(root).client(DRIVER).version == "v1beta1.DRAPlugin"


def test_a_plugin_of_another_type_is_refused_with_the_reason(root: Path) -> None:
    with StubPlugin(root, "n1", plugin_type="CSIPlugin") as plugin:
        dirs = NodeDirs(root, "n1")
        plugins = NodePlugins("n1", dirs.registry)
        with ThreadPoolExecutor(1) as pool:
            plugins.scan(pool.submit)
        assert plugins.drivers() == []
        assert plugin.registrations == [(False, "plugin type 'CSIPlugin' is not DRAPlugin")]


def test_a_removed_registration_socket_deregisters_the_plugin(root: Path) -> None:
    plugin = StubPlugin(root, "n1").start()
    plugins = registered(root)
    plugin.stop()
    with ThreadPoolExecutor(1) as pool:
        plugins.scan(pool.submit)
    assert plugins.client(DRIVER) is None


def _age(directory: Path, seconds: float) -> None:
    """Date the directory's mtime ``seconds`` back, as if nothing had changed in it since."""
    then = time.time() - seconds
    os.utime(directory, (then, then))


def test_the_watcher_reads_a_settled_directory_only_when_its_mtime_moves(root: Path) -> None:
    from draguard.harness.nodes.plugins import PluginWatcher

    dirs = NodeDirs(root, "n1").create()
    plugins = NodePlugins("n1", dirs.registry, call_timeout=5.0)
    with ThreadPoolExecutor(2) as pool:
        watcher = PluginWatcher(pool)
        watcher.add(plugins)
        _age(dirs.registry, 5)
        watcher.scan_once()
        assert plugins.unchanged()  # settled and unchanged: the next scans cost one stat
        with StubPlugin(root, "n1") as plugin:  # its socket moves the directory's mtime: read again at once
            assert not plugins.unchanged()
            deadline = time.monotonic() + 5
            while plugins.drivers() != [DRIVER]:
                assert time.monotonic() < deadline, "the new socket was never registered"
                watcher.scan_once()
                time.sleep(0.05)
            assert plugin.registrations == [(True, "")]
            # Read just after it changed (mtime under STAMP_SETTLED_AFTER old): that scan vouches for nothing,
            # since a change in the same clock tick would leave the mtime as it was.
            assert not plugins.unchanged()
            _age(dirs.registry, 5)
            watcher.scan_once()
            assert plugins.unchanged()
        # The plugin stopped: its socket went, so did the directory's mtime; deregistered on the next scan.
        assert not plugins.unchanged()
        watcher.scan_once()
        assert plugins.client(DRIVER) is None


def test_a_failed_registration_is_retried_although_the_directory_did_not_change(root: Path) -> None:
    with StubPlugin(root, "n1", plugin_type="CSIPlugin"):
        dirs = NodeDirs(root, "n1")
        plugins = NodePlugins("n1", dirs.registry)
        _age(dirs.registry, 5)
        with ThreadPoolExecutor(1) as pool:
            plugins.scan(pool.submit)
        assert plugins.drivers() == [] and not plugins.unchanged()  # a retry is due in RETRY_FAILED_AFTER


def test_one_prepare_call_per_driver_carries_all_claims_of_the_pod(root: Path) -> None:
    with StubPlugin(root, "n1") as gpu, StubPlugin(root, "n1", driver="nic.draguard.dev") as nic:
        m = manager(root, registered(root, drivers=(DRIVER, "nic.draguard.dev")))
        m.prepare_pod("pod-a", [claim("a"), claim("b"), claim("c", "nic.draguard.dev")])
        prepares = gpu.calls_of("NodePrepareResources")
        assert [sorted(r.name for r in c.claims) for c in prepares] == [["a", "b"]]
        assert [[r.name for r in c.claims] for c in nic.calls_of("NodePrepareResources")] == [["c"]]
        assert m.is_prepared("pod-a", [claim("a"), claim("b"), claim("c", "nic.draguard.dev")])


def test_a_claim_shared_with_a_prepared_pod_is_not_prepared_again(root: Path) -> None:
    with StubPlugin(root, "n1") as plugin:
        m = manager(root, registered(root))
        m.prepare_pod("pod-a", [claim("shared")])
        m.prepare_pod("pod-b", [claim("shared"), claim("own")])
        assert plugin.count("NodePrepareResources", "shared") == 1
        assert [[r.name for r in c.claims] for c in plugin.calls_of("NodePrepareResources")] == [["shared"], ["own"]]


def test_a_shared_claim_is_unprepared_only_after_its_last_pod(root: Path) -> None:
    with StubPlugin(root, "n1") as plugin:
        m = manager(root, registered(root))
        m.prepare_pod("pod-a", [claim("shared")])
        m.prepare_pod("pod-b", [claim("shared")])
        m.unprepare_pod("pod-a")
        assert plugin.calls_of("NodeUnprepareResources") == []
        m.unprepare_pod("pod-b")
        assert plugin.count("NodeUnprepareResources", "shared") == 1
        assert m.claims() == {}
        assert plugin.prepared == set()


def test_a_claim_error_fails_the_pod_and_a_retry_prepares_only_what_is_missing(root: Path) -> None:
    with StubPlugin(root, "n1", fail={"bad": "device on fire"}) as plugin:
        m = manager(root, registered(root))
        with pytest.raises(PrepareError, match="claim ns/bad: device on fire"):
            m.prepare_pod("pod-a", [claim("good"), claim("bad")])
        assert not m.is_prepared("pod-a", [claim("good"), claim("bad")])
        plugin.fail.clear()
        m.prepare_pod("pod-a", [claim("good"), claim("bad")])
        assert plugin.count("NodePrepareResources", "good") == 1
        assert plugin.count("NodePrepareResources", "bad") == 2


def test_a_claim_of_an_unregistered_driver_fails_naming_driver_and_claim_without_any_call(root: Path) -> None:
    with StubPlugin(root, "n1") as plugin:
        m = manager(root, registered(root))
        with pytest.raises(PrepareError, match=r"DRA driver other.dev is not registered on node n1 \(claim ns/x\)"):
            m.prepare_pod("pod-a", [claim("ok"), claim("x", "other.dev")])
        assert plugin.calls == []
        m.unprepare_pod("pod-a")  # nothing was sent, so nothing to undo and nothing left behind
        assert plugin.calls == [] and m.claims() == {}


def test_after_a_restart_a_claim_is_prepared_again_once_as_by_the_kubelet_and_nothing_leaks(root: Path) -> None:
    # A restarted kubelet's claim cache comes back from its checkpoint unprepared
    # (pkg/kubelet/cm/dra/claiminfo.go newClaimInfoFromState) and prepareResources (manager.go) skips
    # only claims with isPrepared(): the next pod to need a claim prepares it once more.
    with StubPlugin(root, "n1") as plugin:
        plugins = registered(root)
        m = manager(root, plugins)
        m.prepare_pod("pod-a", [claim("a"), claim("shared")])
        m.prepare_pod("pod-b", [claim("b")])
        m.prepare_pod("pod-c", [claim("shared")])
        saved = Checkpoint.read(NodeDirs(root, "n1").base / "dra_manager_state.json")
        assert saved["uid-a"]["prepared"] is True and saved["uid-a"]["pods"] == ["pod-a"]
        assert saved["uid-a"]["driver"] == DRIVER and saved["uid-a"]["name"] == "a"

        again = manager(root, plugins)  # a restarted agent
        assert not again.is_prepared("pod-a", [claim("a")])
        again.prepare_pod("pod-a", [claim("a"), claim("shared")])
        again.prepare_pod("pod-c", [claim("shared")])  # prepared again for pod-a already
        again.prepare_pod("pod-a", [claim("a"), claim("shared")])  # no further call in this life
        assert [[r.name for r in c.claims] for c in plugin.calls_of("NodePrepareResources")] == [
            ["a", "shared"], ["b"], ["a", "shared"]
        ]
        again.forget_inactive({"pod-a", "pod-c"})  # pod-b went away while the agent was down
        assert plugin.count("NodeUnprepareResources", "b") == 1
        assert set(again.claims()) == {"uid-a", "uid-shared"}


def test_unprepare_is_one_call_per_pod_and_driver_and_a_shared_claim_goes_with_its_last_pod(root: Path) -> None:
    # The kubelet unprepares per pod (manager.go unprepareResourcesForPod, and its reconcile loop per
    # inactive pod), never claims of several pods in one call.
    with StubPlugin(root, "n1") as plugin:
        m = manager(root, registered(root))
        m.prepare_pod("pod-a", [claim("a2"), claim("a1"), claim("shared")])
        m.prepare_pod("pod-b", [claim("b"), claim("shared")])
        m.prepare_pod("pod-c", [claim("c")])
        m.forget_inactive(set())
        calls = [[r.name for r in c.claims] for c in plugin.calls_of("NodeUnprepareResources")]
        # In the order the claims were first prepared on the node: a pod's own claims in its spec's order.
        assert calls == [["a2", "a1"], ["shared", "b"], ["c"]], calls
        assert m.claims() == {} and plugin.prepared == set()


def test_a_failed_unprepare_keeps_the_last_pods_reference_and_is_retried_for_that_pod(root: Path) -> None:
    with StubPlugin(root, "n1", fail_unprepare={"bad": "device busy"}) as plugin:
        m = manager(root, registered(root))
        m.prepare_pod("pod-a", [claim("bad"), claim("good")])
        with pytest.raises(PrepareError, match="claim ns/bad: device busy"):
            m.unprepare_pod("pod-a")
        assert {uid: sorted(r.pods) for uid, r in m.claims().items()} == {"uid-bad": ["pod-a"]}
        again = manager(root, m.plugins)  # the reference is in the checkpoint: a restart retries too
        plugin.fail_unprepare.clear()
        again.forget_inactive(set())
        assert [[r.name for r in c.claims] for c in plugin.calls_of("NodeUnprepareResources")] == [
            ["bad", "good"], ["bad"]
        ]
        assert again.claims() == {} and plugin.prepared == set()


def test_a_pod_waits_for_a_shared_claim_that_another_pod_is_preparing(root: Path) -> None:
    with StubPlugin(root, "n1", stall={"shared"}) as plugin:
        m = manager(root, registered(root))
        first = threading.Thread(target=m.prepare_pod, args=("pod-a", [claim("shared")]))
        first.start()
        time.sleep(0.2)
        second = threading.Thread(target=m.prepare_pod, args=("pod-b", [claim("shared")]))
        second.start()
        time.sleep(0.2)
        plugin.release()
        first.join(5)
        second.join(5)
        assert plugin.count("NodePrepareResources", "shared") == 1
        assert m.is_prepared("pod-b", [claim("shared")])


def test_an_unprepare_before_the_driver_registers_again_is_retried_for_the_pod_not_leaked(root: Path) -> None:
    # After a restart the first unprepare of a pod deleted meanwhile can come before its driver
    # re-registered. A version that dropped the pod's reference before the call leaked the claim here
    # (the pod's retry found no claim of it); the reference stays until the driver unprepared it.
    with StubPlugin(root, "n1") as plugin:
        manager(root, registered(root)).prepare_pod("pod-a", [claim("a")])
        again = DraManager("n1", NodePlugins("n1", NodeDirs(root, "n1").registry), NodeDirs(root, "n1").base)
        with pytest.raises(PrepareError, match=f"DRA driver {DRIVER} is not registered on n1"):
            again.unprepare_pod("pod-a")
        assert {uid: sorted(r.pods) for uid, r in again.claims().items()} == {"uid-a": ["pod-a"]}
        again.plugins = registered(root)
        again.unprepare_pod("pod-a")
        assert plugin.count("NodeUnprepareResources", "a") == 1
        assert again.claims() == {} and plugin.prepared == set()


def test_the_checkpoint_is_written_once_before_the_call_and_once_after_as_by_the_kubelet(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepareResources in pkg/kubelet/cm/dra/manager.go syncs its checkpoint before the calls and after;
    the write before already holds the pod's reference and the call about to be made."""
    saved: list[dict[str, tuple[set[str], bool, bool]]] = []
    real_save = Checkpoint.save

    def save(self: Checkpoint) -> None:
        saved.append({u: (set(c.pods), c.drivers[DRIVER].sent, c.drivers[DRIVER].prepared) for u, c in self.claims.items()})
        real_save(self)

    monkeypatch.setattr(Checkpoint, "save", save)
    with StubPlugin(root, "n1"):
        m = manager(root, registered(root))
        m.prepare_pod("pod-a", [claim("a")])
        assert saved == [{"uid-a": ({"pod-a"}, True, False)}, {"uid-a": ({"pod-a"}, True, True)}]
        saved.clear()
        m.prepare_pod("pod-b", [claim("a")])  # prepared already: no call, the reference still written
        assert saved == [{"uid-a": ({"pod-a", "pod-b"}, True, True)}]
    assert Checkpoint.read(NodeDirs(root, "n1").base / "dra_manager_state.json")["uid-a"]["pods"] == ["pod-a", "pod-b"]

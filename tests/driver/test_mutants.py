"""The mutant registry (every known-bug mode documented, misuse caught at definition) and each new
mutant's behaviour at the gRPC level, side by side with the correct driver over real sockets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from draguard.harness.driver.fault_control import set_faults
from draguard.harness.driver.mutants import FLAGS, MUTANTS, Mutant, get_mutant, mutant
from draguard.harness.driver.plugin import FakeDriver
from draguard.harness.driver.service import PluginServer
from draguard.harness.driver.state import DeviceState, read_checkpoint
from draguard.harness.core.errors import DefinitionError, UsageError
from draguard.harness.grpcapi.plugin import ClaimRef, PluginCallError, PluginClient
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs

from .conftest import NODE, ClaimStore, allocated_claim, make_driver

EXPECTED = {
    "forget-before-reset",
    "prepare-started-leak",
    "stale-prepare",
    "unprepare-needs-claim",
    "incomplete-cdi",
    "double-allocation",
    "batch-abort-on-error",
    "lock-across-reset",
    "non-idempotent-prepare",
    "unknown-unprepare-error",
    "silent-health",
    "xid-overreaction",
    "leave-sharing-state",
    "cdi-not-recreated",
    "discard-corrupt-checkpoint",
    "ignore-predecessor-claims",
}


def test_the_registry_holds_each_known_bug_documented_and_switching_one_flag() -> None:
    assert set(MUTANTS) == EXPECTED
    for name, cls in MUTANTS.items():
        assert cls.name == name and cls.upstream
        assert len((cls.__doc__ or "").strip().splitlines()) > 2, f"{name}: document the bug and how it shows"
        assert sum(getattr(cls, f) for f in FLAGS) == 1
    assert len({tuple(getattr(c, f) for f in FLAGS) for c in MUTANTS.values()}) == len(MUTANTS)


def test_the_correct_driver_switches_no_flag() -> None:
    assert get_mutant(None) is Mutant and get_mutant("none") is Mutant
    assert not any(getattr(Mutant, f) for f in FLAGS)


def test_an_unknown_mutant_name_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UsageError, match="'forget-after-reset': no such mutant; known: batch-abort-on-error, cdi-not-recreated, discard-corrupt-checkpoint, double-allocation"):
        get_mutant("forget-after-reset")


def test_defining_a_mutant_wrongly_is_refused_with_the_class_named() -> None:
    with pytest.raises(DefinitionError, match="already registered"):

        @mutant("stale-prepare", upstream="x")
        class Again(Mutant):
            """Doc."""

            accept_stale_prepare = True

    with pytest.raises(DefinitionError, match="Undocumented: add a docstring"):

        @mutant("undocumented", upstream="x")
        class Undocumented(Mutant):
            incomplete_cdi = True

    with pytest.raises(DefinitionError, match="exactly one of"):

        @mutant("two-bugs", upstream="x")
        class TwoBugs(Mutant):
            """Doc."""

            incomplete_cdi = True
            allow_double_allocation = True

    assert set(MUTANTS) == EXPECTED


# -- the new mutants over gRPC -------------------------------------------------------------------


@contextmanager
def serving(root: Path, store: ClaimStore, mutant: str | None) -> Iterator[tuple[FakeDriver, PluginClient]]:
    """A driver (correct or mutant) served on real unix sockets, and a client for it."""
    dirs = NodeDirs(root, NODE)
    drv = make_driver(root, store, mutant=mutant)
    srv = PluginServer(drv, dirs.dra_socket(DEFAULT_DRIVER), dirs.registration_socket(DEFAULT_DRIVER), 0.05)
    srv.start()
    try:
        with PluginClient(srv.dra_socket, srv.registration_socket, timeout=20) as client:
            yield drv, client
    finally:
        srv.stop(grace=0)


@pytest.mark.parametrize("mutant", [None, "batch-abort-on-error"])
def test_batch_abort_fails_the_whole_prepare_and_leaves_later_claims_unprepared(
    root: Path, store: ClaimStore, mutant: str | None
) -> None:
    bad = store.add(allocated_claim("bad", ["gpu-0"], driver="other.example.com"))
    good = store.add(allocated_claim("good", ["gpu-1"]))
    with serving(root, store, mutant) as (drv, client):
        if mutant is None:
            resp = client.prepare([bad, good])
            assert "other.example.com" in resp[bad.uid].error and resp[good.uid].error == ""
            assert good.uid in drv.snapshot().claims
            return
        with pytest.raises(PluginCallError) as err:
            client.prepare([bad, good])
        assert err.value.code == "UNKNOWN" and "other.example.com" in err.value.details
        assert good.uid not in drv.snapshot().claims  # never reached


@pytest.mark.parametrize("mutant", [None, "batch-abort-on-error"])
def test_batch_abort_on_a_failed_reset_strands_the_other_claims_of_the_unprepare(
    root: Path, store: ClaimStore, mutant: str | None
) -> None:
    broken = store.add(allocated_claim("broken", ["gpu-0"]))
    healthy = store.add(allocated_claim("healthy", ["gpu-1"]))
    with serving(root, store, mutant) as (drv, client):
        assert all(r.error == "" for r in client.prepare([broken, healthy]).values())
        set_faults(root, NODE, reset_fail={"forever": True, "devices": ["gpu-0"]})
        if mutant is None:
            resp = client.unprepare([broken, healthy])
            assert "reset of device gpu-0 failed" in resp[broken.uid] and resp[healthy.uid] == ""
            assert set(drv.snapshot().claims) == {broken.uid}
            return
        with pytest.raises(PluginCallError) as err:
            client.unprepare([broken, healthy])
        assert "reset of device gpu-0 failed" in err.value.details
        cp = drv.snapshot()
        assert healthy.uid in cp.claims and cp.devices["gpu-1"].state is DeviceState.PREPARED


@pytest.mark.parametrize("mutant", [None, "lock-across-reset"])
def test_a_slow_reset_blocks_other_prepares_only_when_the_lock_is_held_across_it(
    root: Path, store: ClaimStore, mutant: str | None
) -> None:
    old = store.add(allocated_claim("old", ["gpu-0"]))
    new = store.add(allocated_claim("new", ["gpu-1"]))
    with serving(root, store, mutant) as (_, client), ThreadPoolExecutor(1) as pool:
        assert client.prepare([old])[old.uid].error == ""
        # 5 s: on a loaded machine (load 20 here) the correct driver's prepare once took over 1.5 s
        set_faults(root, NODE, reset_slow={"seconds": 5.0, "devices": ["gpu-0"]})
        unprepare: Future[dict[str, str]] = pool.submit(client.unprepare, [old])
        deadline = time.monotonic() + 10
        # Read from disk: the mutant holds the driver's lock (and so its snapshot()) during the reset.
        while read_checkpoint(root, NODE).device("gpu-0").state is not DeviceState.RESETTING:
            assert time.monotonic() < deadline, "the reset never started"
            time.sleep(0.01)
        resp = client.prepare([new])  # another claim, another device: nothing to wait for
        reset_over = unprepare.done()
        assert resp[new.uid].error == ""
        assert unprepare.result(timeout=10) == {old.uid: ""}
        # The correct driver answered while gpu-0 was still resetting; the mutant only after it.
        assert reset_over is (mutant is not None)


@pytest.mark.parametrize("mutant", [None, "non-idempotent-prepare"])
def test_a_second_prepare_answers_the_same_cdi_ids_or_leaves_a_spec_behind(
    root: Path, store: ClaimStore, mutant: str | None
) -> None:
    ref = store.add(allocated_claim("c", ["gpu-2"]))
    with serving(root, store, mutant) as (drv, client):
        first = client.prepare([ref])[ref.uid].devices[0].cdi_device_ids
        second = client.prepare([ref])[ref.uid].devices[0].cdi_device_ids
        specs = sorted(p.name for p in drv.dirs.cdi.glob("*.json"))
        assert client.unprepare([ref]) == {ref.uid: ""}
        left = sorted(p.name for p in drv.dirs.cdi.glob("*.json"))
    if mutant is None:
        assert first == second and len(specs) == 1 and left == []
    else:
        assert first != second and len(specs) == 2 and len(left) == 1


@pytest.mark.parametrize("mutant", [None, "unknown-unprepare-error"])
def test_unprepare_of_a_claim_the_driver_never_prepared(root: Path, store: ClaimStore, mutant: str | None) -> None:
    ghost = ClaimRef(namespace="ns", name="ghost", uid="0b5e-never-prepared")
    with serving(root, store, mutant) as (_, client):
        error = client.unprepare([ghost])[ghost.uid]
    assert (error == "") is (mutant is None)
    if mutant is not None:
        assert "not found" in error


@pytest.mark.parametrize("mutant", [None, "silent-health"])
def test_a_failed_device_shows_on_the_health_stream_unless_the_driver_is_silent(
    root: Path, store: ClaimStore, mutant: str | None
) -> None:
    with serving(root, store, mutant) as (drv, client):
        stream = client.watch_health(timeout=10)
        next(stream)
        set_faults(root, NODE, unhealthy={"devices": ["gpu-3"], "message": "XID 79"})
        seen: set[tuple[str, str]] = set()
        # Resends come at least every 10 intervals (0.5 s): three messages span the change.
        for _ in range(3):
            seen |= {(d.device_name, d.health) for d in next(stream) if d.health != "HEALTHY"}
            if seen:
                break
        stream.cancel()
        sick = {h.device for h in drv.health() if not h.healthy}
    if mutant is None:
        assert seen == {("gpu-3", "UNHEALTHY")} and sick == {"gpu-3"}
    else:
        assert seen == set() and sick == set()

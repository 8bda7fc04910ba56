"""Shared reading of the gRPC interposer's record for the invariants that judge any driver.

What every driver exposes is its DRA calls and their answers (:attr:`Snapshot.driver_calls`, one
:class:`DriverCall` per ended call, as ``harness/proxy`` recorded it). These helpers say whether an
answer was the driver's own, and replay a node's prepare and unprepare calls claim by claim:
:class:`ClaimHistory` walks the record in order and tells, at each call, whether the claim was
prepared (a prepare the driver answered without an error for it, and no successful unprepare since).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from draguard.harness.invariants.per_claim_errors import NOT_THE_DRIVERS_ANSWER, TRANSPORT_HINTS
from draguard.harness.invariants.snapshot import DriverCall, PreparedDevice, Snapshot

__all__ = ["PREPARE", "UNPREPARE", "drivers_answer", "claim_failed", "ClaimState", "ClaimHistory", "replay",
           "history_of"]

PREPARE = "NodePrepareResources"
UNPREPARE = "NodeUnprepareResources"

_FORWARDED = frozenset({None, "delay", "duplicate", "stale-retry"})
"""``DriverCall.injected`` values after which the answer is still the driver's: a delayed call, and the
calls the interposer makes itself (a duplicate, a stale retry). Its other faults answer in its place."""

_NOT_FORWARDED = frozenset({"error", "hang"})
"""Interposer faults that answer the call without passing it on (``harness/proxy/interposer.py``):
the driver never saw it. ``claim-error`` passes on the claims it does not fail."""


def drivers_answer(call: DriverCall) -> bool:
    """Whether the call's outcome is the driver's own answer (not the interposer's fault, no missing
    driver, no caller that gave up, no connection cut)."""
    if call.injected not in _FORWARDED:
        return False
    if call.status == "OK":
        return True
    return (call.status not in NOT_THE_DRIVERS_ANSWER
            and not any(hint.lower() in call.error.lower() for hint in TRANSPORT_HINTS))


def claim_failed(call: DriverCall, uid: str) -> str | None:
    """The driver's failure of claim ``uid`` in ``call`` (its own error, or the call's), None if it succeeded.
    Only meaningful when :func:`drivers_answer` holds."""
    if call.status != "OK":
        return f"{call.status}: {call.error or 'no details'}"
    error = call.claim_errors.get(uid)
    return error if error else None


@dataclass
class ClaimState:
    """What the record says of one claim on one node and driver, up to the current call."""

    prepared: bool = False
    """The driver answered a prepare of it without an error, and no unprepare succeeded since."""
    answer: tuple[PreparedDevice, ...] | None = None
    """The devices that successful prepare answered (None: the record does not carry them)."""
    prepared_by: DriverCall | None = None
    """The call of that successful prepare (None while not prepared)."""
    prepared_at: float = 0.0
    uncertain: bool = False
    """A prepare was sent that the driver did not answer (it was down, crashed or the caller gave up)
    since it was last prepared or unprepared: the driver may hold part of it. A call the interposer
    answered without passing it on changes nothing. A prepare the driver itself failed leaves it not prepared, not uncertain: a failed
    prepare holds nothing (claim-atomic's rule for the driver)."""
    unprepared: bool = False
    """An unprepare of it succeeded and no prepare was sent since."""
    failures: list[DriverCall] = field(default_factory=list)
    """The prepares the driver failed for it since it was last prepared or unprepared, in order."""


@dataclass
class ClaimHistory:
    """Every claim's :class:`ClaimState` per (node, driver, uid), advanced call by call."""

    states: dict[tuple[str, str, str], ClaimState] = field(default_factory=dict)

    def state(self, call: DriverCall, uid: str) -> ClaimState:
        return self.states.setdefault((call.node, call.driver, uid), ClaimState())

    def advance(self, call: DriverCall) -> None:
        """Fold ``call`` into the states of its claims (after the caller looked at the states before it)."""
        if call.injected in _NOT_FORWARDED:
            return  # the driver never saw it: nothing changed for it
        answered = drivers_answer(call)
        for _, _, uid in call.claims:
            if call.injected == "claim-error":  # the claims it failed never reached the driver
                if uid in call.claim_errors:
                    continue
                answered = drivers_answer(dataclasses.replace(call, injected=None))
            st = self.state(call, uid)
            failed = claim_failed(call, uid) if answered else "not answered by the driver"
            if call.method == PREPARE:
                st.unprepared = False
                if failed is None:
                    st.prepared, st.prepared_at, st.uncertain, st.failures = True, call.time, False, []
                    st.answer = call.answers.get(uid, ()) if call.answers is not None else None
                    st.prepared_by = call
                elif answered:
                    st.failures.append(call)
                elif not st.prepared:
                    st.uncertain = True
            elif call.method == UNPREPARE and failed is None:
                st.prepared, st.answer, st.uncertain, st.unprepared, st.failures = False, None, False, True, []
                st.prepared_by = None


def replay(snapshot: Snapshot) -> Iterator[tuple[DriverCall, ClaimHistory]]:
    """Each prepare or unprepare call of the record, in the record's order, with the claims' states
    just before it (the history advances once the caller has looked)."""
    history = ClaimHistory()
    for call in snapshot.driver_calls:
        if call.method not in (PREPARE, UNPREPARE):
            continue
        yield call, history
        history.advance(call)


def history_of(snapshot: Snapshot) -> ClaimHistory:
    """Every claim's state once the whole record so far is replayed."""
    history = ClaimHistory()
    for call in snapshot.driver_calls:
        if call.method in (PREPARE, UNPREPARE):
            history.advance(call)
    return history

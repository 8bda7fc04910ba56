"""A snapshot's derived indexes are handed on only to a snapshot holding the very same source tuple.

The runner judges twice a second and on every claim change, so the published devices of 500 nodes are
not rebuilt for each round. A stale index would hide a violation (a
device withdrawn, a new claim on it), so the hand-on is by identity of the source, never by age."""

from __future__ import annotations

from invariant_objects import claim, gpus, request, result

from draguard.harness.invariants import Snapshot, evaluate


def test_replace_keeps_the_indexes_of_unchanged_fields_and_rebuilds_the_others() -> None:
    slices = (gpus("node-a"), gpus("node-b"))
    a = claim("a", [request()], [result("gpu-0")])
    first = Snapshot(time=0, claims=(a,), slices=slices)
    devices, by_name = first.devices, first.claims_by_name
    b = claim("b", [request()], [result("gpu-0")])
    second = first.replace(claims=(a, b))
    assert second.devices is devices, "same slices: the published devices are not built again"
    assert second.claims_by_name is not by_name and set(second.claims_by_name) == {("chaos", "a"), ("chaos", "b")}
    # and what the invariants see through the kept index is still right: both claims on gpu-0
    assert len(evaluate(second, ["no-double-allocation"])["no-double-allocation"]) == 1
    third = second.replace(slices=(gpus("node-a", 2),))
    assert third.devices is not devices and len(third.devices) == 2


def test_with_views_of_hands_on_only_what_was_computed_from_the_same_tuple() -> None:
    slices = (gpus("node-a"),)
    earlier = Snapshot(time=0, slices=slices, claims=(claim("a", [request()], [result("gpu-0")]),))
    earlier.devices, earlier.claims_by_name  # noqa: B018  (computed and cached)
    equal_but_new = tuple(dict(s) for s in slices)
    later = Snapshot(time=1, slices=equal_but_new, claims=earlier.claims).with_views_of(earlier)
    assert later.devices is not earlier.devices, "an equal tuple is not the same tuple"
    assert later.claims_by_name is earlier.claims_by_name
    assert Snapshot(time=2, slices=slices).with_views_of(None).devices == earlier.devices
    # a withdrawn device is gone from the later snapshot, not kept from the earlier one
    withdrawn = Snapshot(time=3, slices=(gpus("node-a", 3),), claims=earlier.claims).with_views_of(earlier)
    assert len(withdrawn.devices) == 3

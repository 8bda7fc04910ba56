"""Two instances of the fake driver over one plugin directory, as in a rolling update (the kubeletplugin
helper's RollingUpdate): the correct driver's new instance takes over the claims its predecessor prepared,
including one the old instance prepared after the new one had started; the ignore-predecessor-claims
mutant's new instance does not know them. Also the rolling-update socket names, as the helper picks them."""

from __future__ import annotations

from pathlib import Path

from draguard.harness import cdi
from draguard.harness.core.paths import DEFAULT_DRIVER, NodeDirs
from draguard.harness.driver.state import ClaimState, DeviceState, read_checkpoint

from .conftest import NODE, ClaimStore, allocated_claim, make_driver


def test_the_new_instance_unprepares_what_the_old_one_prepared_before_and_after_it_started(root: Path) -> None:
    api = ClaimStore()
    old = make_driver(root, api)
    before = api.add(allocated_claim("before", ["gpu-0"]))
    assert old.prepare([before])[before.uid].error == ""
    new = make_driver(root, api, instance="3f2a9c1e-0000-4000-8000-000000000001")
    after = api.add(allocated_claim("after", ["gpu-1"]))  # a call the old instance still served
    assert old.prepare([after])[after.uid].error == ""

    taken = api.add(allocated_claim("taken", ["gpu-1"]))
    assert "gpu-1 is not available" in new.prepare([taken])[taken.uid].error  # it knows gpu-1 is held
    assert new.prepare([after])[after.uid].devices == old.snapshot().claims[after.uid].devices  # same answer
    assert new.unprepare([before, after]) == {before.uid: "", after.uid: ""}
    cp = read_checkpoint(root, NODE)
    assert cp.claims == {} and set(cp.device_states().values()) == {DeviceState.FREE}
    assert not list(new.cdi_dir.glob(f"{DEFAULT_DRIVER}-*"))


def test_the_mutant_instance_forgets_the_claims_of_its_predecessor(root: Path) -> None:
    api = ClaimStore()
    old = make_driver(root, api, mutant="ignore-predecessor-claims")  # the first instance: plain names, shared books
    mine = api.add(allocated_claim("mine", ["gpu-0"]))
    old.prepare([mine])
    new = make_driver(root, api, mutant="ignore-predecessor-claims", instance="3f2a9c1e-0000-4000-8000-000000000002")
    assert new.unprepare([mine]) == {mine.uid: ""}  # "unknown claim, nothing to do"
    cp = read_checkpoint(root, NODE)
    assert cp.claims[mine.uid].state is ClaimState.PREPARE_COMPLETED and cp.device_states()["gpu-0"] is DeviceState.PREPARED
    assert cdi.spec_path(new.cdi_dir, DEFAULT_DRIVER, mine.uid).exists()
    other = api.add(allocated_claim("other", ["gpu-0"]))
    assert new.prepare([other])[other.uid].error == ""  # a device in use, handed out as free


def test_rolling_update_socket_names_fit_a_unix_socket_as_the_helper_picks_them(tmp_path: Path) -> None:
    uid = "8be893a6-79b2-43e1-9d18-a94f3016e953"
    short = NodeDirs(Path("/r"), "n")
    assert short.registration_socket("gpu.example.com", uid).name == f"gpu.example.com-{uid}-reg.sock"
    assert short.dra_socket("gpu.example.com", uid).name == f"dra-{uid}.sock"
    assert short.registration_socket("gpu.example.com").name == "gpu.example.com-reg.sock"
    deep = NodeDirs(Path("/tmp/draguard-317c0d69"), "gpu-node-0")
    name = deep.registration_socket("gpu.draguard.dev", uid)
    # the UID does not fit: 8 bytes of its SHA-256, base64url without padding (values from Go's crypto/sha256
    # and encoding/base64.RawURLEncoding, as the helper computes them)
    assert name.name == "gpu.draguard.dev-W8AXi6-nRk8-reg.sock" and len(str(name)) <= 107
    assert deep.dra_socket("gpu.draguard.dev", uid).name == f"dra-{uid}.sock"
    deeper = NodeDirs(Path("/tmp/" + "x" * 40), "gpu-node-0")
    assert deeper.dra_socket("gpu.draguard.dev", uid).name == "dra-W8AXi6-nRk8.sock"
    assert deeper.registration_socket("gpu.draguard.dev", uid).name == "dra-PBYowWX-p7_1U_eZTCQaBg-reg.sock"

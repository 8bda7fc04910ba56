"""harness/cdi.py against the rules of the CDI specification (cncf-tags/container-device-interface
SPEC.md, spec 0.8.0, and the reference library's parser/version rules)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from draguard.harness import cdi

# The shape of the specification's JSON definition, filled in: spec-level edits, per-device edits.
VENDOR_SPEC: dict[str, Any] = {
    "cdiVersion": "0.5.0",
    "kind": "vendor.com/device",
    "devices": [
        {"name": "myDevice", "containerEdits": {"deviceNodes": [
            {"hostPath": "/vendor/dev/card1", "path": "/dev/card1", "type": "c", "major": 25, "minor": 25,
             "fileMode": 384, "permissions": "rw", "uid": 1000, "gid": 1000},
            {"path": "/dev/card-render1", "type": "c", "major": 25, "minor": 25, "permissions": "rwm"}]}},
        {"name": "0", "containerEdits": {"env": ["FOO=VALID_SPEC"]}},
    ],
    "containerEdits": {
        "deviceNodes": [{"hostPath": "/vendor/dev/vendorctl", "path": "/dev/vendorctl"}],
        "env": ["VENDOR=1"],
        "mounts": [{"hostPath": "/bin/vendorBin", "containerPath": "/bin/vendorBin"}],
        "hooks": [{"hookName": "createContainer", "path": "/bin/vendor-hook", "args": ["vendor-hook", "--x"]}],
    },
}  # fmt: skip


@pytest.mark.parametrize("kind", ["vendor.com/foo", "foo.bar.baz/foo-bar123.B_az"])
def test_the_specs_valid_kinds_parse(kind: str) -> None:
    vendor, class_ = cdi.parse_kind(kind)
    assert f"{vendor}/{class_}" == kind


@pytest.mark.parametrize("kind", ["foo", "vendor.com/foo/", "vendor.com/foo/bar", "1vendor.com/foo", "vendor.com/foo-"])
def test_the_specs_invalid_kinds_are_rejected(kind: str) -> None:
    with pytest.raises(cdi.CdiError, match="kind"):
        cdi.parse_kind(kind)


def test_qualified_names_split_into_vendor_class_and_name_and_reject_bad_ones() -> None:
    assert cdi.parse_qualified_name("nvidia.com/gpu=GPU-1234:0") == ("nvidia.com", "gpu", "GPU-1234:0")
    assert str(cdi.parse_qualified_name("vendor.com/device=myDevice")) == "vendor.com/device=myDevice"
    for bad in ("myDevice", "vendor.com/device", "vendor.com/device=", "/dev/card1", "vendor.com/device=-x",
                "vendor.com/dev=ice=x"):  # fmt: skip
        with pytest.raises(cdi.CdiError):
            cdi.parse_qualified_name(bad)


def test_a_spec_uses_no_feature_newer_than_its_version() -> None:
    base = {"kind": "vendor.com/device", "devices": [{"name": "d", "containerEdits": {"env": ["A=1"]}}]}
    features = {
        "0.4.0": {"containerEdits": {"mounts": [{"hostPath": "/a", "containerPath": "/a", "type": "bind"}]}},
        "0.5.0": {"containerEdits": {"deviceNodes": [{"path": "/dev/x", "hostPath": "/dev/y"}]}},
        "0.6.0": {"annotations": {"a": "b"}},
        "0.7.0": {"containerEdits": {"additionalGids": [5]}},
    }
    for needed, extra in features.items():
        spec = {**base, **extra}
        assert cdi.minimum_version(spec) == needed
        older = cdi.SPEC_VERSIONS[cdi.SPEC_VERSIONS.index(needed) - 1]
        with pytest.raises(cdi.CdiError, match=f"uses features of CDI {needed} but declares cdiVersion {older}"):
            cdi.parse_spec({**spec, "cdiVersion": older})
        assert cdi.parse_spec({**spec, "cdiVersion": needed}).kind == "vendor.com/device"
    assert cdi.minimum_version({**base, "kind": "vendor.com/dev.ice"}) == "0.6.0", "dots in the class came with 0.6.0"
    assert cdi.minimum_version({**base, "devices": [{"name": "0abc"}]}) == "0.5.0", "a name starting with a digit"
    assert cdi.minimum_version({**base, "containerEdits": {"intelRdt": {"closID": "c"}}}) == "0.7.0"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cdiVersion": "0.2.0"}, "not a released CDI spec version"),
        ({"cdiVersion": "9.9.9"}, "not a released CDI spec version"),
        ({"devices": []}, "at least one device"),
        ({"devices": [{"name": "a"}, {"name": "a"}]}, "defined twice"),
        ({"devices": [{"name": "bad name"}]}, "device name 'bad name'"),
        ({"containerEdits": {"env": ["NOVALUE"]}}, "is not NAME=VALUE"),
        ({"containerEdits": {"deviceNodes": [{"hostPath": "/dev/x"}]}}, "'path' is required"),
        ({"containerEdits": {"deviceNodes": [{"path": "/dev/x", "permissions": "rx"}]}}, "only contain r, w and m"),
        ({"containerEdits": {"mounts": [{"hostPath": "/a"}]}}, "'hostPath' and 'containerPath' are required"),
        ({"containerEdits": {"hooks": [{"hookName": "createContainer", "path": "rel"}]}}, "must be absolute"),
        ({"containerEdits": {"hooks": [{"hookName": "later", "path": "/x"}]}}, "hookName must be one of"),
    ],
)
def test_specs_breaking_the_rules_are_rejected_with_the_reason(change: dict[str, Any], message: str) -> None:
    with pytest.raises(cdi.CdiError, match=message):
        cdi.parse_spec({**VENDOR_SPEC, **change}, "vendor.json")


def test_resolving_applies_the_specs_own_edits_once_then_each_devices(tmp_path: Path) -> None:
    (tmp_path / "vendor.json").write_text(json.dumps(VENDOR_SPEC))
    edits = cdi.Registry([tmp_path]).resolve(["vendor.com/device=myDevice", "vendor.com/device=0"])
    assert edits.env == ("VENDOR=1", "FOO=VALID_SPEC")
    assert [n.path for n in edits.device_nodes] == ["/dev/vendorctl", "/dev/card1", "/dev/card-render1"]
    assert [n.source for n in edits.device_nodes] == ["/vendor/dev/vendorctl", "/vendor/dev/card1", "/dev/card-render1"]
    assert [m.container_path for m in edits.mounts] == ["/bin/vendorBin"]
    assert [h.hook_name for h in edits.hooks] == ["createContainer"]


def test_yaml_specs_are_read_too(tmp_path: Path) -> None:
    (tmp_path / "vendor.yaml").write_text(
        "cdiVersion: 0.6.0\nkind: vendor.com/device\ndevices:\n- name: d0\n  containerEdits:\n    env: [X=1]\n"
    )
    assert cdi.Registry([tmp_path]).resolve(["vendor.com/device=d0"]).environment() == {"X": "1"}


def test_an_id_no_spec_defines_is_unresolvable_and_named(tmp_path: Path) -> None:
    (tmp_path / "vendor.json").write_text(json.dumps(VENDOR_SPEC))
    with pytest.raises(cdi.UnresolvableDevices) as info:
        cdi.Registry([tmp_path]).resolve(["vendor.com/device=myDevice", "vendor.com/device=nope", "other.com/x=y"])
    assert info.value.ids == ("vendor.com/device=nope", "other.com/x=y")
    assert "unresolvable CDI devices vendor.com/device=nope, other.com/x=y" in str(info.value)


def test_a_device_defined_twice_in_one_directory_conflicts_and_a_later_directory_wins(tmp_path: Path) -> None:
    low, high = tmp_path / "etc-cdi", tmp_path / "run-cdi"
    low.mkdir()
    high.mkdir()
    one = {"cdiVersion": "0.3.0", "kind": "vendor.com/device", "devices": [{"name": "d", "containerEdits": {"env": ["W=1"]}}]}
    two = {**one, "devices": [{"name": "d", "containerEdits": {"env": ["W=2"]}}]}
    (low / "a.json").write_text(json.dumps(one))
    (low / "b.json").write_text(json.dumps(two))
    with pytest.raises(cdi.UnresolvableDevices, match="defined by 2 specs"):
        cdi.Registry([low]).resolve(["vendor.com/device=d"])
    (high / "c.json").write_text(json.dumps({**one, "devices": [{"name": "d", "containerEdits": {"env": ["W=3"]}}]}))
    assert cdi.Registry([low, high]).resolve(["vendor.com/device=d"]).env == ("W=3",)


def test_a_broken_spec_file_is_reported_and_defines_nothing(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "empty.json").write_text(json.dumps({**VENDOR_SPEC, "devices": []}))
    registry = cdi.Registry([tmp_path])
    assert set(registry.errors) == {str(tmp_path / "broken.json"), str(tmp_path / "empty.json")}
    assert registry.devices == {}


def test_the_fake_drivers_claim_spec_is_valid_and_resolves_to_its_device_nodes(tmp_path: Path) -> None:
    uid = "0a1b2c3d-0000-1111-2222-333344445555"
    spec = cdi.claim_spec("gpu.draguard.dev", uid, [cdi.ClaimDevice("gpu-0", "GPU-x", "req", "/host/dev/gpu-0")])
    path = cdi.write_spec(cdi.spec_path(tmp_path, "gpu.draguard.dev", uid), spec)
    assert path.name == f"gpu.draguard.dev-{uid}.json"
    cid = cdi.claim_device_id("gpu.draguard.dev", uid, "gpu-0")
    edits = cdi.Registry([tmp_path]).resolve([cid])
    assert edits.environment()["DRAGUARD_CLAIM_UID"] == uid
    assert [(n.path, n.source) for n in edits.device_nodes] == [("/dev/draguard/gpu-0", "/host/dev/gpu-0")]
    assert cdi.check_ids(tmp_path, [cid]) == []
    with pytest.raises(cdi.CdiError):
        cdi.write_spec(tmp_path / "bad.json", {**spec, "devices": []})
    assert not (tmp_path / "bad.json").exists(), "an invalid spec is never written"
    assert cdi.remove_spec(path) is True and cdi.remove_spec(path) is False


def test_registries_sharing_their_parses_parse_an_unchanged_spec_once_and_see_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake node reads its CDI directory before every container start; what it parsed is kept by
    text, never by file time, so a rewrite is always seen and a broken or removed spec defines nothing."""
    calls: list[str] = []
    real = cdi.parse_spec
    monkeypatch.setattr(cdi, "parse_spec", lambda raw, source: calls.append(source) or real(raw, source))
    spec = tmp_path / "vendor.json"
    spec.write_text(json.dumps(VENDOR_SPEC))
    parsed: dict[Path, tuple[str, cdi.Spec]] = {}
    for _ in range(3):
        assert cdi.Registry([tmp_path], parsed).resolve(["vendor.com/device=0"]).env == ("VENDOR=1", "FOO=VALID_SPEC")
    assert calls == [str(spec)], "an unchanged spec was parsed again"
    changed = {**VENDOR_SPEC, "devices": [{"name": "0", "containerEdits": {"env": ["FOO=CHANGED"]}}]}
    spec.write_text(json.dumps(changed))
    assert cdi.Registry([tmp_path], parsed).resolve(["vendor.com/device=0"]).env == ("VENDOR=1", "FOO=CHANGED")
    spec.write_text("{not json")
    broken = cdi.Registry([tmp_path], parsed)
    assert broken.devices == {} and str(spec) in broken.errors
    spec.unlink()
    assert cdi.Registry([tmp_path], parsed).devices == {} and parsed == {}

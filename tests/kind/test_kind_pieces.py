"""The kind backend's pieces that need no container engine: quirk detection and what each quirk adds,
the runtime wrapper's edits, the docker-archive writer, the host-change log's undo, and the one-line
exit 2 when the pieces a kind cluster needs are missing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

from draguard.harness.cluster.kind import quirks
from draguard.harness.cluster.kind.hostlog import HostLog, processes_with
from draguard.harness.cluster.kind.oci import Entry, ImageSpec, write_image

FULL = "CapBnd:\t000001ffffffffff\n"
NO_SYS_RESOURCE = "CapBnd:\t000001fffeffffff\n"


def _names(found: list[quirks.Quirk]) -> set[str]:
    return {q.name for q in found}


def test_quirks_detected_only_where_they_apply(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    v1 = tmp_path / "v1"
    v1.mkdir()
    sysctls = tmp_path / "sys"  # inotify limits at kind's floor
    (sysctls / "fs" / "inotify").mkdir(parents=True)
    (sysctls / "fs" / "inotify" / "max_user_instances").write_text("512\n")
    (sysctls / "fs" / "inotify" / "max_user_watches").write_text("524288\n")
    assert _names(quirks.detect(False, FULL, v2, sysctls)) == set()
    assert _names(quirks.detect(False, NO_SYS_RESOURCE, v2, sysctls)) == {"capabilities", "oom-score-adj"}
    assert _names(quirks.detect(True, FULL, v1, sysctls)) == {"cgroup-v1", "no-kindnetd"}
    caps = next(q for q in quirks.detect(False, NO_SYS_RESOURCE, v2, sysctls) if q.name == "capabilities")
    assert caps.data == ("CAP_SYS_RESOURCE",)
    (sysctls / "fs" / "inotify" / "max_user_instances").write_text("128\n")  # Debian's default
    [inotify] = [q for q in quirks.detect(False, FULL, v2, sysctls) if q.name == "inotify"]
    assert "fs.inotify.max_user_instances 128 < 512" in inotify.note and "watches" not in inotify.note
    for q in quirks.detect(True, NO_SYS_RESOURCE, v1, sysctls):
        assert q.note and "\n" not in q.note


def test_kind_config_fragments_per_quirk() -> None:
    all_quirks = [quirks.Quirk("capabilities", "", ("CAP_SYS_RESOURCE",)), quirks.Quirk("oom-score-adj", ""),
                  quirks.Quirk("cgroup-v1", ""), quirks.Quirk("no-kindnetd", "")]
    frag = quirks.kind_config_fragments(all_quirks)
    assert yaml.safe_load(frag["kubeadmConfigPatches"][0]) == {"kind": "KubeletConfiguration", "failCgroupV1": False}
    assert "restrict_oom_score_adj = true" in frag["containerdConfigPatches"][0]
    assert frag["networking"] == {"disableDefaultCNI": True}
    assert quirks.kind_config_fragments([]) == {}
    assert set(quirks.kind_config_fragments([all_quirks[2]])) == {"kubeadmConfigPatches"}


def test_runtime_wrapper_drops_missing_capabilities(tmp_path: Path) -> None:
    # A stand-in runc records the files it was handed, so the test sees what runc would have read.
    seen = tmp_path / "seen"
    fake_runc = tmp_path / "runc"
    fake_runc.write_text(f"#!/bin/sh\necho \"$@\" >> {seen}\n")
    fake_runc.chmod(0o755)
    wrapper = quirks.write_runtime_wrapper(quirks.Quirk("capabilities", "", ("CAP_SYS_RESOURCE",)), tmp_path / "w", str(fake_runc))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    caps = ["CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": {k: caps for k in ("bounding", "effective", "permitted")}}}))
    subprocess.run([str(wrapper), "--root", "/x", "create", "--bundle", str(bundle), "id1"], check=True)
    config = json.loads((bundle / "config.json").read_text())
    assert all(v == ["CAP_SYS_ADMIN", "CAP_NET_ADMIN"] for v in config["process"]["capabilities"].values())
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "capabilities": {"bounding": caps}}))
    subprocess.run([str(wrapper), "exec", "--process", str(process), "id1"], check=True)
    assert json.loads(process.read_text())["capabilities"]["bounding"] == ["CAP_SYS_ADMIN", "CAP_NET_ADMIN"]
    lines = seen.read_text().splitlines()
    assert lines[0].endswith("create --bundle " + str(bundle) + " id1") and "exec --process" in lines[1]


def test_docker_archive_is_consistent(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"#!/bin/sh\necho hi\n")
    archive = write_image(ImageSpec(tags=["example.dev/tool:v1"], entries=[Entry("/usr/bin/tool", source=binary),
                                    Entry("/bin/sh2", link="tool"), Entry("/tmp", mode=0o1777, directory=True)],
                                    entrypoint=["/usr/bin/tool"]), tmp_path / "img.tar")  # fmt: skip
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert manifest[0]["RepoTags"] == ["example.dev/tool:v1"]
        config = json.loads(tar.extractfile(manifest[0]["Config"]).read())  # type: ignore[union-attr]
        layer = tar.extractfile(manifest[0]["Layers"][0]).read()  # type: ignore[union-attr]
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert config["os"] == "linux" and config["architecture"] in ("amd64", "arm64")
    assert config["config"]["Entrypoint"] == ["/usr/bin/tool"]
    with tarfile.open(fileobj=__import__("io").BytesIO(layer)) as inner:
        names = {m.name: m for m in inner.getmembers()}
    assert names["usr/bin/tool"].mode == 0o755 and names["bin/sh2"].linkname == "tool"
    assert names["tmp"].isdir() and names["usr"].isdir()


def test_hostlog_undo_from_the_file_alone_and_twice(tmp_path: Path) -> None:
    marker = str(tmp_path / "engine-exec-root")
    created = tmp_path / "created-dir"
    tree = tmp_path / "tree"
    log = HostLog(tmp_path / "host.jsonl")
    log.record("dir", path=str(created))
    log.record("tree", path=str(tree))
    log.record("processes", marker=marker)
    created.mkdir()
    (tree / "sub").mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while proc.pid not in processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in processes_with(marker)
        done = HostLog(tmp_path / "host.jsonl").undo(log=lambda s: None)  # a fresh reader: no memory of the writer
        proc.wait(timeout=15)  # reaped by the undo already (it is our child) or now
        assert processes_with(marker) == []
        assert not created.exists() and not tree.exists()
        assert any("stopped pid" in d for d in done)
        assert not log.path.exists()
        assert HostLog(tmp_path / "host.jsonl").undo(log=lambda s: None) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_missing_pieces_exit_2_with_one_line(tmp_path: Path) -> None:
    """No docker or podman answers and the tools for a private dockerd are not on PATH: exit 2, one line naming them."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = dict(os.environ, PATH=str(bindir), XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    proc = subprocess.run([sys.executable, "-m", "draguard.cli", "cluster", "up", "--backend", "kind", "--name", "t"],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "dockerd (Debian package docker.io)" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "state" / "draguard" / "kind" / "engine" / "host.jsonl").exists()

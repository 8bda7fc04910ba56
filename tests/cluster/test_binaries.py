"""How control-plane binaries are found: explicit dir, cache (with manifest), download with sha256, Go build."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from draguard.harness.cluster import binaries as bins
from draguard.harness.core.errors import HarnessError

SCRIPT = b"#!/bin/sh\necho fake\n"


def _serve_release(root: Path, corrupt: str | None = None) -> None:
    """Lay out a release tree as dl.k8s.io and the etcd release page do."""
    d = root / bins.K8S_VERSION / "bin" / "linux" / "amd64"
    d.mkdir(parents=True)
    for name in bins.COMPONENTS[1:]:
        (d / name).write_bytes(SCRIPT + name.encode())
        digest = hashlib.sha256(SCRIPT + name.encode()).hexdigest()
        if name == corrupt:
            digest = "0" * 64
        (d / f"{name}.sha256").write_text(digest)
    e = root / "etcd" / bins.ETCD_VERSION
    e.mkdir(parents=True)
    tarname = f"etcd-{bins.ETCD_VERSION}-linux-amd64.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"etcd-{bins.ETCD_VERSION}-linux-amd64/etcd")
        info.size = len(SCRIPT)
        tar.addfile(info, io.BytesIO(SCRIPT))
    (e / tarname).write_bytes(buf.getvalue())
    (e / "SHA256SUMS").write_text(f"{hashlib.sha256(buf.getvalue()).hexdigest()}  {tarname}\n")


@pytest.fixture
def release_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DRAGUARD_BIN_DIR", raising=False)
    monkeypatch.setattr(bins, "_platform", lambda: ("linux", "amd64"))


def test_release_binaries_are_downloaded_and_checked_against_their_sha256(release_server) -> None:  # type: ignore[no-untyped-def]
    url, root = release_server
    _serve_release(root)
    found = bins.download_release(base_url=url, progress=lambda m: None)
    assert found.source == "download"
    for name in bins.COMPONENTS:
        assert found.has(name), name
    bins.verify_cache_entry(found.directory)
    assert bins.resolve(allow_download=False, allow_build=False).source == "cache"


def test_a_download_with_a_wrong_sha256_is_rejected_and_leaves_no_cache_entry(release_server) -> None:  # type: ignore[no-untyped-def]
    url, root = release_server
    _serve_release(root, corrupt="kube-scheduler")
    with pytest.raises(HarnessError, match="sha256 mismatch.*kube-scheduler"):
        bins.download_release(base_url=url, progress=lambda m: None)
    assert not bins.cache_entry().exists()
    assert not bins.cache_entry().with_name(bins.K8S_VERSION + ".partial").exists()


def test_a_corrupt_cache_entry_is_an_error_naming_it(release_server) -> None:  # type: ignore[no-untyped-def]
    url, root = release_server
    _serve_release(root)
    found = bins.download_release(base_url=url, progress=lambda m: None)
    (found.directory / "kube-apiserver").write_bytes(b"tampered")
    with pytest.raises(HarnessError, match=r"corrupt binary cache entry .*kube-apiserver does not match"):
        bins.resolve(allow_download=False, allow_build=False)
    (found.directory / "manifest.json").write_text("{not json")
    with pytest.raises(HarnessError, match="unreadable manifest.json"):
        bins.resolve(allow_download=False, allow_build=False)


def test_no_binaries_and_no_go_toolchain_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bins.shutil, "which", lambda name: None)
    with pytest.raises(HarnessError, match="no Go toolchain"):
        bins.resolve(allow_download=False)


def test_an_explicit_directory_must_hold_every_component(tmp_path: Path) -> None:
    (tmp_path / "etcd").write_bytes(SCRIPT)
    (tmp_path / "etcd").chmod(0o755)
    with pytest.raises(HarnessError, match="lacks executable kube-apiserver, kube-scheduler, kube-controller-manager"):
        bins.resolve(bin_dir=tmp_path)


def test_go_build_is_stamped_with_the_release_version() -> None:
    flags = bins._ldflags("v1.37.2")
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in flags
    assert "-X k8s.io/component-base/version.gitMinor=37" in flags
    gomod = (bins.GOMOD_DIR / "go.mod").read_text()
    assert "k8s.io/kubernetes v1.37.2" in gomod
    assert "k8s.io/api => k8s.io/api v0.37.2" in gomod


def _fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `go` that writes its -o file and logs its package argument: the build steps without Go."""
    bindir = tmp_path / "gobin"
    bindir.mkdir()
    calls = tmp_path / "go-calls"
    go = bindir / "go"
    go.write_text('#!/bin/sh\nout=""; prev=""\nfor a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
                  f'echo "$a" >> {calls}\nprintf "#!/bin/sh\\necho kubelet\\n" > "$out"\nchmod +x "$out"\n')
    go.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    return calls


def test_the_hollow_kubelet_is_built_into_an_existing_entry_once_and_again_when_its_sources_change(
    release_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    url, root = release_server
    _serve_release(root)
    entry = bins.download_release(base_url=url, progress=lambda _: None)
    calls = _fake_go(tmp_path, monkeypatch)
    bins.ensure_built(entry, (bins.KUBELET,), progress=lambda _: None)
    assert entry.has(bins.KUBELET)
    assert calls.read_text().split() == ["./kubelet"]
    bins.verify_cache_entry(entry.directory, (*bins.COMPONENTS, bins.KUBELET))
    bins.ensure_built(entry, (bins.KUBELET,), progress=lambda _: None)
    assert calls.read_text().split() == ["./kubelet"], "an up-to-date kubelet is not rebuilt"
    monkeypatch.setattr(bins, "sources_digest", lambda: "changed")
    bins.ensure_built(entry, (bins.KUBELET,), progress=lambda _: None)
    assert calls.read_text().split() == ["./kubelet", "./kubelet"], "a kubelet built from other sources is rebuilt"
    assert not list(entry.directory.glob(".*partial"))


def test_the_kubelet_sources_are_staged_as_a_package_of_the_module(tmp_path: Path) -> None:
    bins.stage_module(tmp_path)
    assert {p.name for p in (tmp_path / "kubelet").iterdir()} >= {"main.go", "cm.go", "runtime.go"}
    assert not list((tmp_path / "kubelet").glob("*_test.go"))
    assert (tmp_path / "go.mod").read_bytes() == (bins.GOMOD_DIR / "go.mod").read_bytes()


def test_an_explicit_directory_without_the_kubelet_is_named_not_written(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="lacks executable draguard-kubelet"):
        bins.ensure_built(bins.Binaries(tmp_path, "dir"), (bins.KUBELET,))
    assert not list(tmp_path.iterdir())

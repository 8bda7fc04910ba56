"""One kind cluster (1 control plane + 2 workers) for the kind tests of a session, or a skip that says why.

The cluster's tests need a container engine that can run privileged containers: an existing docker or
podman, or the pieces for a private dockerd (root, Debian's docker.io, runc, iptables), plus what the
offline node image is built from (debootstrap, Go) and busybox-static for the test pod's image.
``make kind-deps`` installs the Debian packages when it runs as root.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from draguard.harness.cluster.kind import engine, image
from draguard.harness.cluster.kind.cluster import KindCluster, list_kind_clusters


def kind_unavailable() -> str | None:
    """Why a kind cluster cannot run here, or None."""
    missing = []
    if not Path("/bin/busybox").is_file():
        missing.append("busybox-static")
    missing += image.missing_build_tools()
    for tool in ("docker", "podman"):
        if shutil.which(tool) and engine._answers(shutil.which(tool) or tool, {}):
            break
    else:
        missing += engine.missing_engine_tools()
    if missing:
        return "kind cluster cannot run here: missing " + ", ".join(dict.fromkeys(missing)) + " (`make kind-deps` as root installs the Debian packages)"
    return None


def engine_cannot_run(tmp: Path) -> str | None:
    """Why the container engine cannot run a privileged container here (an unprivileged CI container, say), or None.

    Starts the private dockerd where no engine runs (the cluster then uses it) and runs a privileged busybox
    container, as kind runs its nodes."""
    from draguard.harness.cluster.kind import quirks
    from draguard.harness.core.errors import DraguardError

    try:
        eng = engine.find(quirks.detect(offline_image=True), progress=lambda s: None)
    except DraguardError as exc:
        return f"docker cannot run here: {exc}"
    try:
        tag = "draguard.dev/busybox:test"
        eng.run(["load", "-i", str(image.busybox_image(tag, tmp / "busybox.tar"))])
        probe = eng.run(["run", "--rm", "--privileged", "--network", "none", tag, "true"], check=False)
        if probe.returncode == 0:
            return None
        reason = f"docker cannot run a privileged container here: {(probe.stderr or probe.stdout).strip()[-300:]}"
    except DraguardError as exc:
        reason = f"docker cannot run here: {exc}"
    if eng.private and not list_kind_clusters():  # started for the probe only: leave nothing running
        engine.PrivateDockerd().stop(lambda s: None)
    return reason


@pytest.fixture(scope="session")
def kind_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindCluster]:
    reason = kind_unavailable()
    if reason:
        pytest.skip(reason)
    reason = engine_cannot_run(tmp_path_factory.mktemp("probe"))
    if reason:
        pytest.skip(reason)
    cluster = KindCluster(f"t{os.getpid()}", workers=2, progress=lambda s: print(s, flush=True))
    cluster.up(timeout=600)
    try:
        yield cluster
    finally:
        if (cluster.dir / "cluster.json").exists():  # a test that brought it down already checked the host
            cluster.down()

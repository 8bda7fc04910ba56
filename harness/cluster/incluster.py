"""In-cluster runs: ``draguard certify`` in a pod, and its bundle copied out, as conformance runs are done.

Two sides of one protocol on a results folder in the pod (deploy/draguard-certify-job.yaml mounts an
``emptyDir`` at ``/results``):

- in the pod, :func:`run_in_pod` (``draguard in-cluster``) writes a kubeconfig from the pod's
  ServiceAccount (:func:`write_kubeconfig`: the token file and CA the kubelet mounts, the API server's
  in-cluster service address), runs ``draguard certify --kubeconfig K --out /results/bundle ARGS``, keeps
  its output in ``certify.log`` and its exit status in ``exit-code``, writes ``done``, and waits until
  ``retrieved`` appears (or its wait runs out); with ``--sonobuoy-dir`` it hands the bundle's archive to
  Sonobuoy instead (the path in Sonobuoy's ``done`` file) and ends;
- outside, :func:`retrieve` (``draguard results``) finds the Job's pod by its ``job-name`` label, waits
  until ``done`` is there, copies the folder out as a tar stream through the API's exec
  (:meth:`Kube.exec`, as ``kubectl cp`` does), writes ``retrieved`` so the pod may end, and gives
  certify's exit status back.

Talks to: the API server (pods, exec), ``draguard certify`` (a child process).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from draguard.harness.core.errors import EXIT_FAILED, EXIT_USAGE, HarnessError, UsageError
from draguard.harness.core.fsio import atomic_write
from draguard.harness.kube import Kind, Kube, Obj

__all__ = ["JOB", "NAMESPACE", "RESULTS", "SA_DIR", "Retrieved", "retrieve", "run_in_pod", "write_kubeconfig"]

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's ServiceAccount token and the cluster's CA."""
NAMESPACE = "draguard-certify"
JOB = "draguard-certify"
"""deploy/draguard-certify-job.yaml's namespace and Job."""
RESULTS = "/results"
"""The results folder in the Job's pod."""
CONTAINER = "certify"
BUNDLE, LOG, EXIT, DONE, RETRIEVED = "bundle", "certify.log", "exit-code", "done", "retrieved"

KUBECONFIG = Path("/tmp/draguard-in-cluster/kubeconfig")
_JOB = Kind("Job", "batch", "v1", "jobs", True)

Progress = Callable[[str], None]


def write_kubeconfig(path: Path, sa_dir: Path = SA_DIR, environ: dict[str, str] | None = None) -> Path:
    """A kubeconfig for this pod's ServiceAccount: the API server's in-cluster address
    (``KUBERNETES_SERVICE_HOST``/``_PORT``), the CA and the token *file* the kubelet mounts (the client
    reads the file, so a rotated token is read again by a new client)."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise UsageError("in-cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set (run in a pod)")
    for name in ("token", "ca.crt"):
        if not (sa_dir / name).is_file():
            raise UsageError(f"in-cluster: {sa_dir / name} is missing (the pod's ServiceAccount token is not mounted)")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    namespace = (sa_dir / "namespace").read_text().strip() if (sa_dir / "namespace").is_file() else "default"
    text = (f"apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n    server: {server}\n"
            f"    certificate-authority: {sa_dir / 'ca.crt'}\nusers:\n- name: serviceaccount\n  user:\n"
            f"    tokenFile: {sa_dir / 'token'}\ncontexts:\n- name: in-cluster\n  context:\n    cluster: in-cluster\n"
            f"    user: serviceaccount\n    namespace: {namespace}\ncurrent-context: in-cluster\n")  # fmt: skip
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, text.encode())
    path.chmod(0o600)
    return path


def run_in_pod(certify: list[str], certify_args: list[str], results: Path, keep_for: float,
               sonobuoy_dir: Path | None = None, progress: Progress = print, sa_dir: Path = SA_DIR,
               kubeconfig: Path = KUBECONFIG) -> int:  # fmt: skip
    """Run certify (``certify``: the command line that starts it, given by the command line layer) in this
    pod into ``results`` and wait until the results are taken (see the module)."""
    for flag in ("--kubeconfig", "--out", "--verify"):
        if any(a == flag or a.startswith(flag + "=") for a in certify_args):
            raise UsageError(f"in-cluster: {flag} is set by draguard in-cluster; leave it out of the certify arguments")
    results.mkdir(parents=True, exist_ok=True)
    for stale in (DONE, RETRIEVED, EXIT):
        (results / stale).unlink(missing_ok=True)
    write_kubeconfig(kubeconfig, sa_dir)
    argv = [*certify, "--kubeconfig", str(kubeconfig), "--out", str(results / BUNDLE), *certify_args]
    progress("draguard in-cluster: certify " + " ".join(argv[len(certify):]))
    with (results / LOG).open("wb") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        for line in proc.stdout:  # to the pod's log and to the results
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            log.write(line)
        code = proc.wait()
    atomic_write(results / EXIT, f"{code}\n".encode())
    progress(f"draguard in-cluster: certify exited {code}")
    if sonobuoy_dir is not None:
        return _hand_to_sonobuoy(results, code, sonobuoy_dir, progress)
    atomic_write(results / DONE, b"")
    progress(f"draguard in-cluster: results in {results}; waiting up to {keep_for:.0f}s for `draguard results`")
    deadline = time.monotonic() + keep_for
    while not (results / RETRIEVED).exists():
        if time.monotonic() > deadline:
            progress("draguard in-cluster: nobody retrieved the results; ending (they go with the pod)")
            return EXIT_FAILED
        time.sleep(2)
    progress("draguard in-cluster: results retrieved")
    return 0


def _hand_to_sonobuoy(results: Path, code: int, sonobuoy_dir: Path, progress: Progress) -> int:
    """Sonobuoy's worker waits for ``<dir>/done`` holding the path of the results file; with result-format
    junit it reads the junit files in the archive. certify's own ``bundle.tar.gz`` carries junit_01.xml;
    when certify wrote no bundle (bad input), a junit with one failed case carries its log's tail."""
    sonobuoy_dir.mkdir(parents=True, exist_ok=True)
    target = sonobuoy_dir / "draguard.tar.gz"
    archive = results / f"{BUNDLE}.tar.gz"
    if archive.is_file():
        shutil.copyfile(archive, target)
    else:
        tail = (results / LOG).read_text(errors="replace").strip().splitlines()[-5:]
        message = "\n".join(tail) or f"draguard certify exited {code} and wrote no bundle"
        from xml.sax.saxutils import escape, quoteattr

        junit = ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="draguard certify" tests="1" '
                 f'failures="1"><testcase name="draguard certify" classname="draguard"><failure message={quoteattr(tail[-1] if tail else "no bundle")}>'
                 f"{escape(message)}</failure></testcase></testsuite></testsuites>\n")  # fmt: skip
        with tarfile.open(target, "w:gz") as tar:
            for name, data in (("junit_01.xml", junit.encode()), (LOG, (results / LOG).read_bytes())):
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), int(time.time())
                tar.addfile(info, io.BytesIO(data))
    atomic_write(sonobuoy_dir / "done", str(target).encode())
    progress(f"draguard in-cluster: {target} handed to Sonobuoy")
    return 0


@dataclass(frozen=True)
class Retrieved:
    pod: str
    folder: Path  # the copied results folder (bundle/, certify.log, exit-code)
    code: int  # certify's exit status in the pod


def _pod(kube: Kube, namespace: str, job: str) -> Obj | None:
    pods = kube.items("Pod", namespace, label_selector=f"job-name={job}")
    pods.sort(key=lambda p: str(p["metadata"].get("creationTimestamp", "")))
    return pods[-1] if pods else None


def retrieve(kube: Kube, out: Path, namespace: str = NAMESPACE, job: str = JOB, timeout: float = 3600.0,
             progress: Progress = print) -> Retrieved:  # fmt: skip
    """Wait until the Job's run is done, copy its results folder into ``out`` and let the pod end."""
    if kube.get("Namespace", namespace) is None:
        raise UsageError(f"namespace {namespace} does not exist (apply deploy/draguard-certify-job.yaml first)")
    if kube.get(_JOB, job, namespace) is None:
        raise UsageError(f"no Job {namespace}/{job} (apply deploy/draguard-certify-job.yaml first)")
    deadline = time.monotonic() + timeout
    said = ""
    while True:
        pod = _pod(kube, namespace, job)
        phase = str(pod.get("status", {}).get("phase", "")) if pod else ""
        name = str(pod["metadata"]["name"]) if pod else ""
        if pod and phase == "Running":
            rc, _, _ = kube.exec(name, namespace, ["test", "-e", f"{RESULTS}/{DONE}"], CONTAINER, timeout=60)
            if rc == 0:
                break
            state = f"pod {name} running certify"
        elif pod and phase in ("Succeeded", "Failed"):
            raise HarnessError(f"pod {namespace}/{name} has ended ({phase}) and its results went with it; "
                               "delete the Job and apply it again")  # fmt: skip
        else:
            waiting = [f"{c.get('state', {}).get('waiting', {}).get('reason')}" for c in
                       (pod or {}).get("status", {}).get("containerStatuses") or () if c.get("state", {}).get("waiting")]
            state = (f"pod {name} {phase or 'Pending'}" + (f" ({', '.join(waiting)})" if waiting else "")) if pod else \
                "no pod of the Job yet"
        if state != said:
            progress(f"draguard results: {state}")
            said = state
        if time.monotonic() > deadline:
            raise HarnessError(f"draguard results: the run in {namespace}/{job} is not done after {timeout:.0f}s ({state})")
        time.sleep(3)
    progress(f"draguard results: copying {RESULTS} out of pod {name}")
    rc, data, err = kube.exec(name, namespace, ["tar", "-C", RESULTS, "-cf", "-", BUNDLE, f"{BUNDLE}.tar.gz", LOG, EXIT], CONTAINER,
                              timeout=600)  # fmt: skip
    if rc != 0 and not data:
        raise HarnessError(f"copying the results out of {namespace}/{name} failed (tar exit {rc}): {err.strip()[-300:]}")
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        tar.extractall(out, filter="data")
    text = (out / EXIT).read_text().strip() if (out / EXIT).is_file() else ""
    if not text.lstrip("-").isdigit():
        raise HarnessError(f"the results of {namespace}/{name} carry no certify exit status ({out / EXIT})")
    rc, _, err = kube.exec(name, namespace, ["touch", f"{RESULTS}/{RETRIEVED}"], CONTAINER, timeout=60)
    if rc != 0:
        progress(f"draguard results: could not tell pod {name} to end ({err.strip()[-200:]}); it ends when its wait runs out")
    return Retrieved(name, out, int(text) if int(text) in (0, EXIT_FAILED, EXIT_USAGE) else EXIT_FAILED)

"""Mutants: switchable modes of the fake driver that reproduce known DRA driver bugs.

The conformance suite is run against the correct driver (every check passes) and against each
mutant (the checks aimed at that bug fail), as csi-sanity is tested against its mock driver. A
mutant is a subclass of :class:`Mutant` registered with :func:`mutant`; its docstring says which
bug it models and how the bug shows, and it switches on exactly one behaviour flag that
:mod:`.plugin` consults. The registry rejects a duplicate name, a missing docstring, or a class
that switches no flag or several.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

from draguard.harness.core.errors import DefinitionError, UsageError

__all__ = ["Mutant", "MUTANTS", "mutant", "get_mutant", "FLAGS"]

FLAGS = (
    "forget_before_reset",
    "keep_prepare_started",
    "accept_stale_prepare",
    "unprepare_needs_claim",
    "incomplete_cdi",
    "allow_double_allocation",
    "abort_batch_on_error",
    "lock_across_reset",
    "reprepare_completed",
    "unknown_unprepare_error",
    "silent_health",
    "xid_overreaction",
    "keep_sharing_state",
    "cdi_not_recreated",
    "discard_corrupt_checkpoint",
    "ignore_predecessor_claims",
)


class Mutant:
    """The correct driver: no bug switched on."""

    name: ClassVar[str] = "none"
    upstream: ClassVar[str] = ""
    forget_before_reset: ClassVar[bool] = False
    keep_prepare_started: ClassVar[bool] = False
    accept_stale_prepare: ClassVar[bool] = False
    unprepare_needs_claim: ClassVar[bool] = False
    incomplete_cdi: ClassVar[bool] = False
    allow_double_allocation: ClassVar[bool] = False
    abort_batch_on_error: ClassVar[bool] = False
    lock_across_reset: ClassVar[bool] = False
    reprepare_completed: ClassVar[bool] = False
    unknown_unprepare_error: ClassVar[bool] = False
    silent_health: ClassVar[bool] = False
    xid_overreaction: ClassVar[bool] = False
    keep_sharing_state: ClassVar[bool] = False
    cdi_not_recreated: ClassVar[bool] = False
    discard_corrupt_checkpoint: ClassVar[bool] = False
    ignore_predecessor_claims: ClassVar[bool] = False

    @classmethod
    def describe(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]


MUTANTS: dict[str, type[Mutant]] = {}


M = TypeVar("M", bound=type[Mutant])


def mutant(name: str, upstream: str) -> Callable[[M], M]:
    """Class decorator: register a mutant under ``name``; ``upstream`` cites the bug it models."""

    def register(cls: M) -> M:
        where = f"mutant class {cls.__qualname__}"
        if not (isinstance(cls, type) and issubclass(cls, Mutant)):
            raise DefinitionError(f"{where}: must subclass Mutant")
        if name in MUTANTS:
            raise DefinitionError(f"{where}: name {name!r} is already registered by {MUTANTS[name].__qualname__}")
        if not (cls.__doc__ or "").strip() or cls.__doc__ == Mutant.__doc__:
            raise DefinitionError(f"{where}: add a docstring that says which bug it models")
        switched = [f for f in FLAGS if getattr(cls, f)]
        if len(switched) != 1:
            raise DefinitionError(f"{where}: switch on exactly one of {', '.join(FLAGS)} (got {switched or 'none'})")
        cls.name = name
        cls.upstream = upstream
        MUTANTS[name] = cls
        return cls

    return register


def get_mutant(name: str | None) -> type[Mutant]:
    """The mutant called ``name`` (``None`` or ``"none"``: the correct driver)."""
    if name is None or name == "none":
        return Mutant
    try:
        return MUTANTS[name]
    except KeyError:
        raise UsageError(f"--mutant {name!r}: no such mutant; known: {', '.join(sorted(MUTANTS))}") from None


@mutant("forget-before-reset", upstream="draguard issue 3: a device must be reset before its claim is forgotten")
class ForgetBeforeReset(Mutant):
    """Unprepare drops the claim from the checkpoint before resetting its devices.

    When the reset then fails (or the driver dies during it) nothing remembers which claim held
    the device: the device stays ``failed``/``resetting`` with no claim, unprepare has already
    reported success, the kubelet never retries, and the device is lost to the node (a leak).
    """

    forget_before_reset = True


@mutant("prepare-started-leak", upstream="kubernetes-sigs/dra-driver-nvidia-gpu#840")
class PrepareStartedLeak(Mutant):
    """Claims stuck in ``PrepareStarted`` are never cleaned up.

    A prepare interrupted after its first checkpoint write leaves a ``PrepareStarted`` entry;
    unprepare treats such an entry as "nothing to do" and reports success, and no background
    cleanup looks at it, so its devices stay reserved for a claim that no longer exists.
    """

    keep_prepare_started = True


@mutant("stale-prepare", upstream="kubernetes-sigs/dra-driver-nvidia-gpu#1162 (fixed by PR #1188)")
class StalePrepare(Mutant):
    """A prepare that was in flight when the same claim was unprepared still succeeds.

    The kubelet gave up on a slow prepare and unprepared the claim; when the stale prepare
    finishes, the driver records the claim as prepared again, and its devices stay allocated to a
    claim the kubelet considers unprepared ("already allocated to different claim" later).
    """

    accept_stale_prepare = True


@mutant("unprepare-needs-claim", upstream="NVIDIA/k8s-dra-driver#340 (fixed by PR #342)")
class UnprepareNeedsClaim(Mutant):
    """Unprepare reads the ResourceClaim from the API server and fails when it is gone.

    Unprepare must work from the claim UID and local state only: a user may force-delete the
    pod and its claim while the pod runs. This mutant then fails unprepare forever and the
    devices are never released.
    """

    unprepare_needs_claim = True


@mutant("incomplete-cdi", upstream="kubernetes-sigs/dra-driver-nvidia-gpu#1380")
class IncompleteCdi(Mutant):
    """Prepare writes a CDI spec that names none of the returned CDI device IDs.

    Prepare reports success, but the runtime cannot resolve the IDs (or the container starts
    without its device), as when the spec is generated before the device nodes exist.
    """

    incomplete_cdi = True


@mutant("double-allocation", upstream="kubernetes-sigs/dra-driver-nvidia-gpu PR #817")
class DoubleAllocation(Mutant):
    """Prepare hands a device that another prepared claim holds to a second claim.

    The driver does not check its own records before preparing, so a scheduler race (a device
    freed in the API before the node unprepared it) gives two claims the same device.
    """

    allow_double_allocation = True



@mutant(
    "batch-abort-on-error",
    upstream="guardrail rule 4, the bad unprepare (`return nil, err` inside the loop); per-claim results "
    "of the batched API: kubernetes/kubernetes#119012",
)
class BatchAbortOnError(Mutant):
    """The first failing claim of a request aborts the whole call.

    Prepare and unprepare stop at the first claim that fails and fail the RPC itself (a gRPC
    error instead of a per-claim error): the claims before it were done but their results are
    lost, the claims after it are never touched. With one claim that keeps failing, every other
    claim that the kubelet batches with it is stranded.
    """

    abort_batch_on_error = True


@mutant(
    "lock-across-reset",
    upstream="guardrail rule 4 (handlers are lock-free); a driver-wide lock held for a whole unprepare: "
    "kubernetes-sigs/dra-driver-nvidia-gpu PR #332 (nodeUnprepareResource takes d.Lock() for the call)",
)
class LockAcrossReset(Mutant):
    """Unprepare holds the driver's one lock while it resets and drains devices.

    A device reset takes seconds to minutes on real hardware; while it runs, every other
    NodePrepareResources on the node waits for the lock, so pods that need other, free devices
    do not start until the reset ends (or the kubelet's 45 s call timeout fires and it retries).
    """

    lock_across_reset = True


@mutant(
    "non-idempotent-prepare",
    upstream="kubernetes-sigs/dra-driver-nvidia-gpu#729 (repeated Prepare re-prepared devices); "
    "kubernetes-sigs/dranet PR #339 (each retry allocated new resources, orphaning the old)",
)
class NonIdempotentPrepare(Mutant):
    """A second prepare of an already prepared claim prepares it afresh.

    Instead of answering from its checkpoint, the driver prepares the claim again under new CDI
    device IDs with a new CDI spec; the first spec (and what it describes) is never removed, so a
    kubelet retry after a lost reply (a timeout, a driver crash before the answer) leaves
    orphaned state behind after the claim is unprepared.
    """

    reprepare_completed = True


@mutant(
    "unknown-unprepare-error",
    upstream="kubernetes/kubernetes#131957 (the kubelet unprepares claims whose prepare may never have "
    "reached the driver); the guardrail's good unprepare: an unknown claim is success",
)
class UnknownUnprepareError(Mutant):
    """Unprepare of a claim the driver does not know returns an error.

    The kubelet calls NodeUnprepareResources for every claim it may have asked to prepare,
    including one whose prepare failed before the driver recorded it. Answering "unknown claim"
    with an error makes the kubelet retry forever: the pod stays Terminating and its claim stays
    reserved.
    """

    unknown_unprepare_error = True


@mutant(
    "silent-health",
    upstream="KEP-4680 device health (kubernetes/kubernetes PR #130606, the DRAResourceHealth stream)",
)
class SilentHealth(Mutant):
    """The driver never reports a failed device.

    Its health check is blind: the dra-health stream says every device is healthy and the
    ResourceSlices carry no taint, even for a device whose reset failed or that the hardware
    reports broken, so the scheduler keeps handing the broken device to new claims and pods
    are never told that their device failed.
    """

    silent_health = True


@mutant(
    "xid-overreaction",
    upstream="NVIDIA/k8s-device-plugin internal/rm/health.go: the application Xids (13, 31, 43, 45, 68) are "
    "skipped, since the GPU still works after them",
)
class XidOverreaction(Mutant):
    """The health check takes an application's Xid error for a broken GPU.

    An Xid caused by the program on the GPU (13 Graphics Engine Exception, 31 memory page fault, 43
    stopped processing, 45 preemptive cleanup, 68 video processor exception) leaves the GPU working;
    this driver reports the GPU unhealthy and taints it anyway, so a working GPU leaves service after
    any crashing application and the pods that need it stay Pending.
    """

    xid_overreaction = True


@mutant("leave-sharing-state", upstream="guardrail rule 6: shared accelerators have deterministic cleanup when the pod ends")
class LeaveSharingState(Mutant):
    """Unprepare resets the device but leaves its MPS / time-slicing set-up behind.

    The sharing strategy a claim configured (an MPS control daemon, a time-slice compute policy)
    outlives the claim: the next claim on the device inherits it, with no sharing of its own asked
    for. The driver's books are clean; only the device shows the state.
    """

    keep_sharing_state = True


@mutant(
    "cdi-not-recreated",
    upstream="kubernetes/kubernetes#141433 (fixed in the driver: kubernetes-sigs/dra-example-driver PR #259); "
    "the kubelet prepares again after a reboot: kubernetes/kubernetes PR #141966",
)
class CdiNotRecreated(Mutant):
    """A repeated prepare of a prepared claim answers from the checkpoint without its CDI spec.

    After a node reboot the CDI directory (tmpfs) is empty while the checkpoint still lists the claim
    as prepared; the kubelet prepares the claims of its pods again, the driver answers with the same
    CDI device IDs but writes no spec, and the restarted container fails with CreateContainerError
    (unresolvable CDI devices) until the pod is deleted.
    """

    cdi_not_recreated = True


@mutant(
    "discard-corrupt-checkpoint",
    upstream="kubernetes-sigs/dra-driver-nvidia-gpu#1100 (a corrupted checkpoint; PR #1259 starts afresh "
    "and reports it with a CheckpointCorrupted event)",
)
class DiscardCorruptCheckpoint(Mutant):
    """A damaged checkpoint is thrown away in silence: the driver starts with every device free.

    The claims it had prepared are forgotten without a word: their unprepare is "unknown claim,
    nothing to do", so their devices are never reset, and a device still in use is handed to the next
    claim as free.
    """

    discard_corrupt_checkpoint = True


@mutant(
    "ignore-predecessor-claims",
    upstream="k8s.io/dynamic-resource-allocation/kubeletplugin RollingUpdate (both instances share the plugin "
    "data directory; each must load the shared state at the start of a call; kubelet >= 1.33)",
)
class IgnorePredecessorClaims(Mutant):
    """In a rolling update the new instance ignores the claims the old one prepared.

    It keeps its books in a file of its own, named after its pod: the claims its predecessor prepared
    are unknown to it. Their unprepare is "unknown claim, nothing to do", so their devices are never
    reset and their CDI specs stay; a device still in use is handed to the next claim as free.
    """

    ignore_predecessor_claims = True

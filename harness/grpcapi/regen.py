"""Regenerate the committed gRPC stubs from the project's own .proto files.

    python -m draguard.harness.grpcapi.regen          # rewrite the stubs
    python -m draguard.harness.grpcapi.regen --check  # exit 1 if the committed stubs differ

Needs grpcio-tools (the ``dev`` extra). The protos are compiled as if they lived at
``draguard/harness/grpcapi/`` so that the generated imports are package-absolute.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTOS = ("dra_v1", "dra_v1beta1", "pluginregistration", "dra_health_v1alpha1", "dra_health_v1")
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def generate(out: Path) -> None:
    from grpc_tools import protoc  # dev extra

    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "draguard" / "harness" / "grpcapi"
        pkg.mkdir(parents=True)
        for name in PROTOS:
            shutil.copy(HERE / "proto" / f"{name}.proto", pkg / f"{name}.proto")
        args = [
            "protoc",
            f"-I{tmp}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *[str(pkg / f"{name}.proto") for name in PROTOS],
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        for name in PROTOS:
            for suffix in SUFFIXES:
                shutil.copy(pkg / f"{name}{suffix}", out / f"{name}{suffix}")


_GENERATOR_STAMPS = (
    (re.compile(rb"^GRPC_GENERATED_VERSION = '[^']*'$", re.M), b"GRPC_GENERATED_VERSION = <generator>"),
    (re.compile(rb"^# Protobuf Python Version: .*$", re.M), b"# Protobuf Python Version: <generator>"),
    (re.compile(rb"(ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*)\d+,\s*\d+,\s*\d+,"),
     rb"\1<generator>,"),
)
"""Where a stub names the grpcio-tools (and its protoc) that wrote it: the lowest runtime the stub accepts.
A patch release of grpcio-tools changes only these, so --check compares the stubs without them; the
committed stamps stay those of the version they were made with (pyproject's lower bounds)."""


def comparable(stub: bytes) -> bytes:
    """A generated stub without the generator's version stamps."""
    for pattern, replacement in _GENERATOR_STAMPS:
        stub = pattern.sub(replacement, stub)
    return stub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    opts = parser.parse_args(argv)
    if not opts.check:
        generate(HERE)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        stale = [
            f"{name}{suffix}"
            for name in PROTOS
            for suffix in SUFFIXES
            if comparable((Path(tmp) / f"{name}{suffix}").read_bytes()) != comparable((HERE / f"{name}{suffix}").read_bytes())
        ]
    if stale:
        print("stale generated stubs (run python -m draguard.harness.grpcapi.regen):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

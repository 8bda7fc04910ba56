"""The committed gRPC stubs are what the project's protos generate: ``regen --check`` in CI. A stub names
the grpcio-tools release that wrote it; a new patch release changed only that stamp and the check
failed CI on unchanged protos. The stamps are left out of the comparison, nothing else is."""

from __future__ import annotations

import pytest

from draguard.harness.grpcapi import regen


def test_stubs_differing_only_in_the_generators_version_stamps_compare_equal() -> None:
    grpc_stub = (regen.HERE / "dra_v1_pb2_grpc.py").read_bytes()
    pb_stub = (regen.HERE / "dra_v1_pb2.py").read_bytes()
    import re

    newer_grpc = re.sub(rb"GRPC_GENERATED_VERSION = '[^']*'", b"GRPC_GENERATED_VERSION = '1.99.7'", grpc_stub)
    newer_pb = re.sub(rb"# Protobuf Python Version: .*", b"# Protobuf Python Version: 9.1.2", pb_stub)
    newer_pb = re.sub(rb"(Domain\.PUBLIC,\s*)\d+,\s*\d+,\s*\d+,", rb"\g<1>9,\n    1,\n    2,", newer_pb)
    assert newer_grpc != grpc_stub and newer_pb != pb_stub
    assert regen.comparable(newer_grpc) == regen.comparable(grpc_stub)
    assert regen.comparable(newer_pb) == regen.comparable(pb_stub)


def test_any_other_difference_still_makes_a_stub_stale() -> None:
    stub = (regen.HERE / "dra_v1_pb2_grpc.py").read_bytes()
    assert b"NodePrepareResources" in stub
    changed = stub.replace(b"NodePrepareResources", b"NodePrepareResource", 1)
    assert regen.comparable(changed) != regen.comparable(stub)


def test_the_committed_stubs_are_what_the_installed_grpcio_tools_generates() -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) is not installed")
    assert regen.main(["--check"]) == 0

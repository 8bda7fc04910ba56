"""What ``draguard certify`` checks before it touches the cluster: the driver's declared capabilities
(``--capabilities FILE``: a bad file is exit 2 naming the file and the field) and a socket at each
socket path given (exit 2 naming the flag); in both cases no bundle is started."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from draguard.cli.main import main

PRODUCT = ("vendor: Example\nname: GPU\nversion: '1'\ntype: driver\ndescription: d\n"
           "website_url: https://e.com\ndocumentation_url: https://e.com/docs\ncontact_email_address: a@e.com\n"
           "driver_image: registry.example.com/gpu:1\n")


def test_a_bad_capabilities_file_is_exit_2_before_the_cluster_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    product = tmp_path / "product.yaml"
    product.write_text(PRODUCT)
    caps = tmp_path / "caps.yaml"
    caps.write_text("healthStream: true\nmigPartitions: true\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not used: the capabilities are read before the cluster\n")
    code = main(["certify", "--kubeconfig", str(kubeconfig), "--driver", "d", "--device-class", "c",
                 "--product", str(product), "--out", str(tmp_path / "b"), "--capabilities", str(caps),
                 "--idempotent-count", "3"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--capabilities {caps}: migPartitions: Extra inputs are not permitted" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()



@pytest.mark.parametrize("flag", ["--registration-socket", "--plugin-socket"])
def test_a_socket_path_with_no_socket_is_exit_2_before_the_cluster_is_touched(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pre-flight of the sanity part: a typo in a socket path ran every sanity check against nothing
    (each failing on the missing socket) into a bundle; now it is one line naming the flag."""
    product = tmp_path / "product.yaml"
    product.write_text(PRODUCT)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not used: the sockets are checked before the cluster\n")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(tmp_path / "reg.sock"))
        sockets = {"--registration-socket": str(tmp_path / "reg.sock"), "--plugin-socket": str(tmp_path / "reg.sock")}
        sockets[flag] = str(tmp_path / "typo.sock")
        code = main(["certify", "--kubeconfig", str(kubeconfig), "--driver", "d", "--device-class", "c",
                     "--product", str(product), "--out", str(tmp_path / "b"),
                     *(a for kv in sockets.items() for a in kv)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{flag} {tmp_path / 'typo.sock'}: no such socket" in err, err
    assert "Traceback" not in err and not (tmp_path / "b").exists()

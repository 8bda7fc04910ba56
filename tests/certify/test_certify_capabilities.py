"""``draguard certify --capabilities FILE`` reads the driver's declared capabilities before it touches the
cluster: a bad file is exit 2 naming the file and the field, and no bundle is started."""

from __future__ import annotations

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

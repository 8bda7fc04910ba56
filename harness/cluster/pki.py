"""Certificates and credentials for a local control plane, generated into the cluster's run directory.

One throw-away CA signs the apiserver's serving certificate, a client certificate per identity
(admin in ``system:masters``, ``system:kube-scheduler``, ``system:kube-controller-manager``), etcd's
serving and peer certificates and the apiserver's etcd client certificate (etcd accepts clients with a
certificate from this CA only, as kubeadm sets it up); a separate RSA key signs service-account tokens.
Every private key is written 0600 from its first byte. Kubeconfigs are written next to them. Talks to:
the filesystem only.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from ruamel.yaml import YAML

__all__ = ["Pki", "write_kubeconfig", "node_kubeconfig", "write_private"]

_VALID = dt.timedelta(days=365)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def write_private(path: Path, data: bytes) -> None:
    """Write a private key readable by its owner only, never for a moment by anyone else."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


@dataclass(frozen=True)
class Pki:
    """Paths of the generated material (all under ``directory``)."""

    directory: Path

    @property
    def ca_crt(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def etcd_crt(self) -> Path:
        """etcd's certificate, for its client and its peer port (server and client auth)."""
        return self.directory / "etcd.crt"

    @property
    def etcd_key(self) -> Path:
        return self.directory / "etcd.key"

    @property
    def etcd_client(self) -> tuple[Path, Path]:
        """The apiserver's client certificate and key for etcd."""
        return self.client("apiserver-etcd-client")

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    def client(self, name: str) -> tuple[Path, Path]:
        return self.directory / f"{name}.crt", self.directory / f"{name}.key"

    def generate(self, clients: dict[str, tuple[str, str | None]]) -> None:
        """Create the CA, serving cert, SA key pair and one client cert per ``name -> (CN, O)``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
        ca_key = _key()
        ca_name = _name("draguard-local-ca")
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_crt.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        write_private(self.ca_key, _pem_key(ca_key))

        def issue(cn: str, org: str | None, server: bool, client: bool = False) -> tuple[bytes, bytes]:
            key = _key()
            builder = (
                x509.CertificateBuilder()
                .subject_name(_name(cn, org))
                .issuer_name(ca_name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now)
                .not_valid_after(now + _VALID)
                .add_extension(
                    x509.ExtendedKeyUsage(
                        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server and client
                        else [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                    ),
                    critical=False,
                )
            )
            if server:
                builder = builder.add_extension(
                    x509.SubjectAlternativeName(
                        [
                            x509.DNSName("localhost"),
                            x509.DNSName("kubernetes"),
                            x509.DNSName("kubernetes.default.svc"),
                            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                            x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
                        ]
                    ),
                    critical=False,
                )
            cert = builder.sign(ca_key, hashes.SHA256())
            return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)

        crt, key = issue("kube-apiserver", None, server=True)
        self.serving_crt.write_bytes(crt)
        write_private(self.serving_key, key)
        # etcd serves clients and its peer port with one certificate that is also a client certificate
        # (the peer connection authenticates both ways), as kubeadm's etcd/server and etcd/peer do.
        crt, key = issue("draguard-etcd", None, server=True, client=True)
        self.etcd_crt.write_bytes(crt)
        write_private(self.etcd_key, key)
        for name, (cn, org) in {**clients, "apiserver-etcd-client": ("kube-apiserver-etcd-client", None)}.items():
            crt, key = issue(cn, org, server=False)
            c, k = self.client(name)
            c.write_bytes(crt)
            write_private(k, key)
        sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        write_private(self.sa_key, _pem_key(sa))
        self.sa_pub.write_bytes(
            sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )


def write_kubeconfig(path: Path, server: str, pki: Pki, client: str, cluster_name: str) -> Path:
    """Write a kubeconfig for one client identity with embedded CA and client certificate data."""
    crt, key = pki.client(client)

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server, "certificate-authority-data": b64(pki.ca_crt)}}],
        "users": [{"name": client, "user": {"client-certificate-data": b64(crt), "client-key-data": b64(key)}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": client}}],
        "current-context": cluster_name,
    }
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    text = io.StringIO()
    yaml.dump(doc, text)
    write_private(path, text.getvalue().encode())  # it embeds the client's private key
    return path


def node_kubeconfig(pki: Pki, server: str, node: str, path: Path) -> Path:
    """A kubeconfig for ``node``'s kubelet: client certificate ``system:node:<node>`` in ``system:nodes``
    signed by the cluster CA, so the Node authorizer and NodeRestriction apply as on a real node."""
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki.ca_key}: not the EC key draguard generates")
    ca = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    key = _key()
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"system:node:{node}", "system:nodes"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    name = f"node-{node}"
    crt_path, key_path = pki.client(name)
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(key_path, _pem_key(key))
    return write_kubeconfig(path, server, pki, name, "draguard")

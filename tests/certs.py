"""Test certificates made on the fly with ``cryptography`` (none are committed): a CA, a
certificate for ``localhost``/``127.0.0.1`` that serves and dials (the roles use one for
both, as ``security.internal_tls`` does), and a second client certificate."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertFiles:
    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path
    #: a client certificate from a CA the servers do not trust
    stranger_cert: Path
    stranger_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    cert = (
        _builder(_name(name), _name(name), key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    name: str, ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    cert = (
        _builder(_name(name), ca[0].subject, key)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca[1], hashes.SHA256())
    )
    return cert, key


def _write(
    directory: Path, stem: str, pair: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{stem}.pem", directory / f"{stem}.key"
    cert_path.write_bytes(pair[0].public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        pair[1].private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def make_certs(directory: Path) -> CertFiles:
    """Write a CA, a server+client certificate, a client certificate and a stranger's."""
    ca = _ca("vectide-test-ca")
    ca_path, _ = _write(directory, "ca", ca)
    cert, key = _write(directory, "server", _leaf("localhost", ca))
    client_cert, client_key = _write(directory, "client", _leaf("client", ca))
    stranger_cert, stranger_key = _write(directory, "stranger", _leaf("x", _ca("other-ca")))
    return CertFiles(ca_path, cert, key, client_cert, client_key, stranger_cert, stranger_key)

"""A throwaway certificate authority and leaf certificates (security tests, TLS benchmark)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(directory: Path, name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name)).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    (directory / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


#: The URI SAN of a worker certificate (tuplemesh.security.WORKER_URI), as the chart's issuer sets it.
WORKER_URI = "urn:tuplemesh:role:worker"


def make_leaf(
    directory: Path,
    name: str,
    ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    worker: bool = False,
) -> None:
    """A certificate for 127.0.0.1/localhost usable as server and as client; with ``worker``, it
    carries the worker role (only those may open Transfer streams under mTLS)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    role = [x509.UniformResourceIdentifier(WORKER_URI)] if worker else []
    names = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")), *role]
    )
    usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    cert = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca[1].subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(names, False).add_extension(usage, False)
        .sign(ca[0], hashes.SHA256())
    )  # fmt: skip
    (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{name}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )

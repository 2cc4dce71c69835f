"""TLS on loopback for the simulated upstream: a self-signed certificate for 127.0.0.1, made on the spot.

The gateway trusts it the way it trusts any CA: `SSL_CERT_FILE` for a gateway process (read when aiohttp
builds its default context), or `client_context(cert)` for a session made in a test.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from ssl import SSLContext

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (RSA 2048, as common servers use) and its key, written as PEM files."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "upstream.pem", directory / "upstream.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def server_context(cert: Path, key: Path) -> SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def client_context(cert: Path) -> SSLContext:
    """A verifying client context that trusts `cert` only."""
    return ssl.create_default_context(cafile=str(cert))


__all__ = ["SSLContext", "client_context", "self_signed_certificate", "server_context"]

"""`scripts/lock` says what to set when uv cannot reach the package index over TLS.

uv reads none of pip's configuration, so a machine where pip works behind a TLS-inspecting proxy
gets uv's certificate error alone from `scripts/lock --check` (and so from `.ci/run`). Here the real
uv meets a package index on 127.0.0.1 whose certificate no default store trusts — what such a proxy
looks like to it — and the script must name the remedies; given the CA that signed that
certificate in SSL_CERT_FILE, as the message advises, uv gets past TLS (and then fails only because this index
holds no package).
"""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey, *, ca: bool
):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


def inspecting_proxy_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A private CA (as a TLS-inspecting proxy has) and a server certificate for 127.0.0.1 it
    signed: (CA file, server certificate file, server key file)."""
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("an inspecting proxy's CA", ca_key, "an inspecting proxy's CA", ca_key, ca=True)
    server = _certificate("127.0.0.1", server_key, "an inspecting proxy's CA", ca_key, ca=False)
    files = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return files


class _NoPackages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def tls_index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(index URL, the CA that signed its certificate): an HTTPS package index on 127.0.0.1 that holds nothing."""
    ca, certificate, key = inspecting_proxy_certificates(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoPackages)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/simple", ca
    finally:
        server.shutdown()
        server.server_close()


def run_lock_check(index: str, **environment: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("UV_", "SSL_CERT_", "PIP_", "REQUESTS_CA", "CURL_CA")) and key != "VIRTUAL_ENV"
    }
    # The index on 127.0.0.1 only, nothing cached, no retries: uv reaches no other host.
    env |= {"UV": str(UV), "UV_DEFAULT_INDEX": index, "UV_NO_CACHE": "1", "UV_HTTP_RETRIES": "0", **environment}
    return subprocess.run(
        ["bash", "scripts/lock", "--check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.skipif(not UV.exists() or shutil.which("bash") is None, reason="uv comes with the test extra")
def test_a_certificate_error_names_what_to_set(tls_index: tuple[str, Path]) -> None:
    index, _ = tls_index
    result = run_lock_check(index)
    assert result.returncode != 0
    assert "certificate" in result.stderr.lower()  # uv's own error is shown
    assert "SSL_CERT_FILE" in result.stderr and "UV_NATIVE_TLS=1" in result.stderr


@pytest.mark.skipif(not UV.exists() or shutil.which("bash") is None, reason="uv comes with the test extra")
def test_the_advice_works_ssl_cert_file_gets_uv_past_tls(tls_index: tuple[str, Path]) -> None:
    index, ca = tls_index
    result = run_lock_check(index, SSL_CERT_FILE=str(ca))
    assert result.returncode != 0  # the index holds no package: resolution fails, TLS did not
    assert "certificate" not in result.stderr.lower() and "SSL_CERT_FILE" not in result.stderr
    assert "not found" in result.stderr and "UV_DEFAULT_INDEX" in result.stderr

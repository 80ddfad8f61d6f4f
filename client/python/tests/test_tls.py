"""TLS from SAVEPOINT_TLS_CA / SAVEPOINT_TLS_CERT / SAVEPOINT_TLS_KEY, with
certificates made here (trustme): against a mutual-TLS gRPC server of the
test's own (for the refusals, over TCP and a unix socket), and against the
real savepointd serving mutual TLS on loopback."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import trustme

import savepoint
import savepoint.aio
from savepoint import TLSConfig
from savepoint.v1 import savepoint_pb2 as pb
from savepoint.v1 import savepoint_pb2_grpc as pb_grpc


class Info(pb_grpc.SavepointServiceServicer):
    def GetServerInfo(self, req, ctx):  # type: ignore[no-untyped-def]
        return pb.GetServerInfoResponse(version="tls-ok", store_kind="fake")


class Certs:
    def __init__(self, d: Path) -> None:
        self.ca = trustme.CA()
        server = self.ca.issue_cert("localhost", "127.0.0.1")
        client = self.ca.issue_cert("agent@example")
        self.server_key = server.private_key_pem.bytes()
        self.server_chain = b"".join(b.bytes() for b in server.cert_chain_pems)
        self.ca_file = d / "ca.pem"
        self.cert_file = d / "client.pem"
        self.key_file = d / "client.key"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.cert_file.write_bytes(b"".join(b.bytes() for b in client.cert_chain_pems))
        client.private_key_pem.write_to_path(str(self.key_file))

    def env(self, monkeypatch: pytest.MonkeyPatch, cert: bool = True) -> None:
        monkeypatch.setenv("SAVEPOINT_TLS_CA", str(self.ca_file))
        if cert:
            monkeypatch.setenv("SAVEPOINT_TLS_CERT", str(self.cert_file))
            monkeypatch.setenv("SAVEPOINT_TLS_KEY", str(self.key_file))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Certs, str, str]]:
    """A server requiring client certificates, on 127.0.0.1 and on a unix
    socket."""
    certs = Certs(tmp_path_factory.mktemp("certs"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_SavepointServiceServicer_to_server(Info(), server)
    creds = grpc.ssl_server_credentials(
        [(certs.server_key, certs.server_chain)], root_certificates=certs.ca.cert_pem.bytes(), require_client_auth=True
    )
    port = server.add_secure_port("127.0.0.1:0", creds)
    d = tempfile.mkdtemp(prefix="sp", dir="/tmp")
    sock = os.path.join(d, "tls.sock")
    server.add_secure_port("unix:" + sock, creds)
    server.start()
    yield certs, f"127.0.0.1:{port}", "unix:" + sock
    server.stop(None)


FAIL_FAST = savepoint.RetryPolicy(max_attempts=1)


def info(addr: str, **kw: object) -> str:
    with savepoint.Client(addr, retry=FAIL_FAST, timeout=5, **kw) as c:  # type: ignore[arg-type]
        return c.raw.GetServerInfo(pb.GetServerInfoRequest()).version


def test_mtls_from_env(tls_server: tuple[Certs, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    certs, tcp, unix = tls_server
    certs.env(monkeypatch)
    assert info(tcp) == "tls-ok"
    assert info(unix) == "tls-ok"  # checked against "localhost"

    async def ainfo() -> str:
        async with savepoint.aio.AsyncClient(tcp, retry=FAIL_FAST, timeout=5) as c:
            return (await c.raw.GetServerInfo(pb.GetServerInfoRequest())).version

    assert asyncio.run(ainfo()) == "tls-ok"


def test_mtls_refusals(tls_server: tuple[Certs, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    certs, tcp, _ = tls_server
    # No client certificate: the server refuses the handshake.
    certs.env(monkeypatch, cert=False)
    with pytest.raises(savepoint.UnavailableError):
        info(tcp)
    # Plaintext to a TLS server.
    with pytest.raises(savepoint.UnavailableError):
        info(tcp, tls=False)
    # A CA that did not sign the server's certificate.
    other = trustme.CA()
    with pytest.raises(savepoint.UnavailableError):
        info(tcp, tls=TLSConfig(ca=other.cert_pem.bytes(), cert=certs.cert_file.read_bytes(), key=certs.key_file.read_bytes()))
    # The certificate does not name this server.
    with pytest.raises(savepoint.UnavailableError):
        info(tcp, tls=TLSConfig(ca=certs.ca_file.read_bytes(), cert=certs.cert_file.read_bytes(),
                                key=certs.key_file.read_bytes(), server_name="elsewhere.example"))
    # Explicit configuration, no environment.
    monkeypatch.delenv("SAVEPOINT_TLS_CA")
    assert info(tcp, tls=TLSConfig(ca=certs.ca_file.read_bytes(), cert=certs.cert_file.read_bytes(), key=certs.key_file.read_bytes())) == "tls-ok"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mtls_against_savepointd(binaries: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """savepointd with --tls-cert, --tls-key and --tls-client-ca: the client
    saves and reads a session with the SAVEPOINT_TLS_* certificates, and is
    refused without a client certificate."""
    certs = Certs(tmp_path)
    (tmp_path / "server.pem").write_bytes(certs.server_chain)
    (tmp_path / "server.key").write_bytes(certs.server_key)
    (tmp_path / "server.key").chmod(0o600)
    addr = f"127.0.0.1:{free_port()}"
    d = tempfile.mkdtemp(prefix="sp", dir="/tmp")
    log = open(os.path.join(d, "savepointd.log"), "wb")
    proc = subprocess.Popen([binaries[0], "--data-dir", os.path.join(d, "data"), "--listen", addr,
                             "--tls-cert", str(tmp_path / "server.pem"), "--tls-key", str(tmp_path / "server.key"),
                             "--tls-client-ca", str(certs.ca_file)], stdout=log, stderr=log)
    log.close()
    try:
        certs.env(monkeypatch)
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, Path(d, "savepointd.log").read_text()
            try:
                version = info(addr)
                break
            except savepoint.UnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert version  # the daemon's own GetServerInfo, not a fake's
        with savepoint.Client(addr, retry=FAIL_FAST, timeout=5) as c:
            s = c.start("tls-session", "over mutual TLS", messages=[savepoint.Message("user", '"hello"')])
            assert c.resume("tls-session").messages == s.messages
        certs.env(monkeypatch, cert=False)
        monkeypatch.delenv("SAVEPOINT_TLS_CERT", raising=False)
        monkeypatch.delenv("SAVEPOINT_TLS_KEY", raising=False)
        with pytest.raises(savepoint.UnavailableError):
            info(addr)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)

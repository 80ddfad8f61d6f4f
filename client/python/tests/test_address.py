"""The default address resolution and the address syntax, as client/addr.go."""

from __future__ import annotations

import pytest

import savepoint
from savepoint.address import TLSConfig, default_addr, parse_addr


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, "unix:/run/savepoint/savepoint.sock"),
        ({"XDG_RUNTIME_DIR": "/run/user/1000"}, "unix:/run/user/1000/savepoint/savepoint.sock"),
        ({"XDG_RUNTIME_DIR": "/run/user/1000/"}, "unix:/run/user/1000/savepoint/savepoint.sock"),
        ({"XDG_RUNTIME_DIR": "/run/user/1000", "SAVEPOINT_ADDR": "127.0.0.1:7070"}, "127.0.0.1:7070"),
        ({"SAVEPOINT_ADDR": "unix:/tmp/sp.sock"}, "unix:/tmp/sp.sock"),
        ({"SAVEPOINT_ADDR": "", "XDG_RUNTIME_DIR": ""}, "unix:/run/savepoint/savepoint.sock"),
    ],
)
def test_default_addr(env: dict[str, str], want: str) -> None:
    assert default_addr(env.get) == want


def test_default_addr_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAVEPOINT_ADDR", "unix:/tmp/from-env.sock")
    assert savepoint.default_addr() == "unix:/tmp/from-env.sock"
    assert savepoint.Client().address == "unix:/tmp/from-env.sock"


@pytest.mark.parametrize(
    ("addr", "network", "address"),
    [
        ("unix:/run/savepoint/savepoint.sock", "unix", "/run/savepoint/savepoint.sock"),
        ("unix:relative/sp.sock", "unix", "relative/sp.sock"),
        ("unix:///tmp/sp.sock", "unix", "/tmp/sp.sock"),
        ("unix:/tmp/odd #%?.sock", "unix", "/tmp/odd #%?.sock"),
        ("127.0.0.1:7070", "tcp", "127.0.0.1:7070"),
        ("localhost:7070", "tcp", "localhost:7070"),
        ("[::1]:7070", "tcp", "[::1]:7070"),
    ],
)
def test_parse_addr(addr: str, network: str, address: str) -> None:
    ep = parse_addr(addr)
    assert (ep.network, ep.address) == (network, address)


@pytest.mark.parametrize(
    "addr", ["unix:", "unix://relative", "localhost", "localhost:", "/run/savepoint/savepoint.sock", "http://localhost:7070",
             "127.0.0.1:http", "127.0.0.1:70000", ":7777"]
)
def test_parse_addr_bad(addr: str) -> None:
    with pytest.raises(ValueError):
        parse_addr(addr)
    with pytest.raises(ValueError):
        savepoint.Client(addr)


def test_odd_socket_path_is_dialed(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """A socket path holding URI characters reaches the daemon (the target is
    percent-encoded)."""
    import os
    import tempfile

    d = start_daemon()
    odd = tempfile.mkdtemp(prefix="sp #%?", dir="/tmp")
    link = os.path.join(odd, "s.sock")
    os.symlink(d.socket, link)
    with savepoint.Client("unix:" + link) as c:
        with pytest.raises(savepoint.SessionNotFoundError):
            c.resume("no-such-session")
    os.remove(link)
    os.rmdir(odd)


def test_unreachable_daemon_is_unavailable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with savepoint.Client(f"unix:{tmp_path}/none.sock", retry=savepoint.RetryPolicy(max_attempts=2, initial_backoff=0.001)) as c:
        with pytest.raises(savepoint.UnavailableError) as e:
            c.resume("x")
    assert e.value.reason == ""
    with pytest.raises(savepoint.UnavailableError):
        savepoint.Client(f"unix:{tmp_path}/none.sock", wait_ready=0.2)


def test_tls_from_env(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert TLSConfig.from_env({}) is None
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"CA")
    cfg = TLSConfig.from_env({"SAVEPOINT_TLS_CA": str(ca)})
    assert cfg is not None and cfg.ca == b"CA" and cfg.cert is None
    with pytest.raises(ValueError):
        TLSConfig.from_env({"SAVEPOINT_TLS_CA": str(ca), "SAVEPOINT_TLS_CERT": str(ca)})
    with pytest.raises(OSError):
        TLSConfig.from_env({"SAVEPOINT_TLS_CA": str(tmp_path / "missing.pem")})
    assert cfg.name_for(parse_addr("unix:/x.sock")) == "localhost"
    assert cfg.name_for(parse_addr("db.example:7070")) == "db.example"
    assert TLSConfig(server_name="sp").name_for(parse_addr("[::1]:1")) == "sp"

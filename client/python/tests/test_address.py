"""The default address resolution and the address syntax, as internal/addr
(savepointd and the Go client): the cases are internal/addr/testdata/addresses.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import savepoint
from savepoint.address import TLSConfig, default_addr, parse_addr


# The address cases every parser shares with savepointd and the Go client.
_CASES = json.loads((Path(__file__).resolve().parents[3] / "internal/addr/testdata/addresses.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", _CASES["default"], ids=lambda c: c["name"])
def test_default_addr(case: dict[str, Any]) -> None:
    assert default_addr(case["env"].get) == case["want"]


def test_default_addr_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAVEPOINT_ADDR", "unix:/tmp/from-env.sock")
    assert savepoint.default_addr() == "unix:/tmp/from-env.sock"
    assert savepoint.Client().address == "unix:/tmp/from-env.sock"


@pytest.mark.parametrize("case", [c for c in _CASES["parse"] if c["ok"]], ids=lambda c: repr(c["input"]))
def test_parse_addr(case: dict[str, Any]) -> None:
    want = case["want"]
    ep = parse_addr(case["input"])
    assert (ep.network, ep.address, ep.host) == (want["network"], want["address"], want.get("host", ""))
    if ep.network == "tcp":
        assert ep.address.endswith(":" + want["port"])


@pytest.mark.parametrize("case", [c for c in _CASES["parse"] if not c["ok"]], ids=lambda c: repr(c["input"]))
def test_parse_addr_bad(case: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as e:
        parse_addr(case["input"])
    assert str(e.value) == "savepoint: " + case["error"]
    if case["input"]:  # "" is the default address
        with pytest.raises(ValueError):
            savepoint.Client(case["input"])


def test_parse_addr_quotes_bytes_that_are_not_utf8() -> None:
    """An address from the environment may hold bytes that are not UTF-8;
    the error names them as Go's %q does."""
    with pytest.raises(ValueError) as e:
        parse_addr(os.fsdecode(b"127.0.0.1:\xff"))
    assert str(e.value) == 'savepoint: address "127.0.0.1:\\xff": port "\\xff" is not a number in 0-65535'


def test_odd_socket_path_is_dialed(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """A socket path holding URI characters reaches the daemon (the target is
    percent-encoded)."""
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

"""Where savepointd is and how to reach it: the default address resolution
every Savepoint client and the daemon share, the address syntax, and TLS
from the environment."""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import grpc

ENV_ADDR = "SAVEPOINT_ADDR"
"""The environment variable that overrides the default address."""

ENV_TLS_CA = "SAVEPOINT_TLS_CA"
ENV_TLS_CERT = "SAVEPOINT_TLS_CERT"
ENV_TLS_KEY = "SAVEPOINT_TLS_KEY"


def default_addr(getenv: Callable[[str], str | None] = os.environ.get) -> str:
    """Return the address used when none is given: $SAVEPOINT_ADDR when set,
    else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when XDG_RUNTIME_DIR
    is set, else unix:/run/savepoint/savepoint.sock. savepointd resolves its
    default --listen address the same way."""
    if a := getenv(ENV_ADDR):
        return a
    if d := getenv("XDG_RUNTIME_DIR"):
        return "unix:" + os.path.normpath(os.path.join(d, "savepoint", "savepoint.sock"))
    return "unix:/run/savepoint/savepoint.sock"


@dataclass(frozen=True)
class Endpoint:
    """A parsed address: ``network`` is "unix" (``address`` a socket path) or
    "tcp" (``address`` HOST:PORT, ``host`` its host)."""

    network: str
    address: str
    host: str = ""

    @property
    def target(self) -> str:
        """The gRPC target that dials this endpoint. A socket path is
        percent-encoded, since gRPC parses the target as a URI: a path may
        hold anything, "?" and "#" included."""
        if self.network == "unix":
            return "unix:" + urllib.parse.quote(self.address, safe="/")
        return self.address


_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]]*)):(?P<port>[^:]+)$")


def parse_addr(addr: str) -> Endpoint:
    """Parse "unix:PATH" (also "unix://PATH" with an absolute PATH) or
    "HOST:PORT" (an IPv6 host in brackets). Raises ValueError for anything
    else."""
    if addr.startswith("unix:"):
        path = addr[len("unix:") :]
        if path.startswith("//"):
            path = path[2:]
            if not path.startswith("/"):
                raise ValueError(f"savepoint: address {addr!r}: unix://PATH needs an absolute PATH")
        if not path:
            raise ValueError(f"savepoint: address {addr!r}: empty socket path")
        return Endpoint("unix", path)
    m = _HOST_PORT.match(addr)
    host = (m.group("v6") if m.group("v6") is not None else m.group("host")) if m else None
    if m is None or host is None or "/" in host or not m.group("port"):
        raise ValueError(f"savepoint: address {addr!r} is neither unix:PATH nor HOST:PORT")
    port = m.group("port")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(f"savepoint: address {addr!r}: port {port!r} is not a number in 0-65535")
    if host == "":
        raise ValueError(f"savepoint: address {addr!r}: the host is empty; give a loopback address such as 127.0.0.1")
    return Endpoint("tcp", addr, host)


@dataclass(frozen=True)
class TLSConfig:
    """TLS for the connection: ``ca`` is the PEM of the CA that signed the
    daemon's certificate (None: the system's roots); ``cert`` and ``key`` the
    client's certificate and key in PEM for mutual TLS (both or neither);
    ``server_name`` the name the daemon's certificate must hold (None: the
    address's host, or "localhost" for a unix socket)."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("savepoint: TLS: a client certificate needs its key and a key its certificate")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TLSConfig | None:
        """Return the TLS configuration named by SAVEPOINT_TLS_CA,
        SAVEPOINT_TLS_CERT and SAVEPOINT_TLS_KEY (file paths), or None when
        none of them is set. A file that cannot be read raises OSError."""
        env = os.environ if env is None else env
        paths = {k: env.get(k, "") for k in (ENV_TLS_CA, ENV_TLS_CERT, ENV_TLS_KEY)}
        if not any(paths.values()):
            return None
        if bool(paths[ENV_TLS_CERT]) != bool(paths[ENV_TLS_KEY]):
            raise ValueError(f"savepoint: {ENV_TLS_CERT} and {ENV_TLS_KEY} must be set together")

        def read(k: str) -> bytes | None:
            if not paths[k]:
                return None
            with open(paths[k], "rb") as f:
                return f.read()

        return cls(ca=read(ENV_TLS_CA), cert=read(ENV_TLS_CERT), key=read(ENV_TLS_KEY))

    def credentials(self) -> grpc.ChannelCredentials:
        """The gRPC channel credentials of this configuration."""
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert)

    def name_for(self, ep: Endpoint) -> str:
        """The server name checked against the daemon's certificate."""
        if self.server_name:
            return self.server_name
        return ep.host if ep.network == "tcp" and ep.host else "localhost"


# The channel options of every client: a local daemon restarts in moments, so
# reconnect soon (100 ms, x1.6, at most 2 s), not after gRPC's default of up
# to two minutes, as the Go client does.
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.min_reconnect_backoff_ms", 5000),
)


def channel_args(ep: Endpoint, tls: TLSConfig | None) -> list[tuple[str, str | int]]:
    """The channel options for an endpoint: the reconnect backoff, and with
    TLS the name the certificate is checked against."""
    opts: list[tuple[str, str | int]] = list(CHANNEL_OPTIONS)
    if tls is not None:
        name = tls.name_for(ep)
        opts.append(("grpc.ssl_target_name_override", name))
        opts.append(("grpc.default_authority", name))
    return opts

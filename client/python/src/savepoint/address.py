"""Where savepointd is and how to reach it: the default address resolution
every Savepoint client and the daemon share, the address syntax, and TLS
from the environment."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

if TYPE_CHECKING:
    import grpc.aio

ENV_ADDR = "SAVEPOINT_ADDR"
"""The environment variable that overrides the default address."""

ENV_TLS_CA = "SAVEPOINT_TLS_CA"
ENV_TLS_CERT = "SAVEPOINT_TLS_CERT"
ENV_TLS_KEY = "SAVEPOINT_TLS_KEY"


def default_addr(getenv: Callable[[str], str | None] = os.environ.get) -> str:
    """Return the address used when none is given: $SAVEPOINT_ADDR when set,
    else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when XDG_RUNTIME_DIR
    is set, else unix:$XDG_STATE_HOME/savepoint/savepoint.sock
    (XDG_STATE_HOME defaulting to ~/.local/state; a directory the user owns,
    mode 0700), else, with no home either, unix:/run/savepoint/savepoint.sock.
    savepointd resolves its default --listen address the same way."""
    if a := getenv(ENV_ADDR):
        return a
    if d := getenv("XDG_RUNTIME_DIR"):
        return "unix:" + _clean(os.path.join(d, "savepoint", "savepoint.sock"))
    from savepoint._autostart import state_dir

    if s := state_dir(getenv):
        return "unix:" + os.path.join(s, "savepoint.sock")
    return "unix:/run/savepoint/savepoint.sock"


def _clean(path: str) -> str:
    """Go's filepath.Clean: os.path.normpath, which keeps two leading
    slashes (POSIX leaves their meaning open) where Go keeps one."""
    path = os.path.normpath(path)
    return path[1:] if path.startswith("//") else path


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


def parse_addr(addr: str) -> Endpoint:
    """Parse "unix:PATH" (also "unix://PATH" with an absolute PATH) or
    "HOST:PORT" (an IPv6 host in brackets, a port in 0-65535), exactly as
    savepointd and the Go client do (internal/addr). Raises ValueError, whose
    text quotes the address and says what is wrong, for anything else."""
    if addr.startswith("unix:"):
        path = addr[len("unix:") :]
        if path.startswith("//"):
            path = path[2:]
            if not path.startswith("/"):
                raise ValueError(f"savepoint: address {_quote(addr)}: unix:// must be followed by an absolute path")
        if not path:
            raise ValueError(f"savepoint: address {_quote(addr)}: the socket path is empty")
        return Endpoint("unix", path)
    hp = _split_host_port(addr)
    if hp is None or "/" in hp[0]:
        raise ValueError(f"savepoint: address {_quote(addr)} is neither unix:PATH nor HOST:PORT")
    host, port = hp
    if not (port and port.isascii() and port.isdigit() and int(port) <= 65535):
        raise ValueError(f"savepoint: address {_quote(addr)}: port {_quote(port)} is not a number in 0-65535")
    if host == "":
        raise ValueError(f"savepoint: address {_quote(addr)}: the host is empty; give a loopback address such as 127.0.0.1")
    return Endpoint("tcp", addr, host)


def _split_host_port(s: str) -> tuple[str, str] | None:
    """Go's net.SplitHostPort: "HOST:PORT" or "[HOST]:PORT" (the port may be
    empty) as (host, port), or None when malformed."""
    i = s.rfind(":")
    if i < 0:
        return None
    j = k = 0
    if s.startswith("["):
        end = s.find("]")
        if end < 0 or end + 1 != i:  # the "]" must come just before the last ":"
            return None
        host = s[1:end]
        j, k = 1, end + 1
    else:
        host = s[:i]
        if ":" in host:
            return None
    if "[" in s[j:] or "]" in s[k:]:
        return None
    return host, s[i + 1 :]


def _quote(s: str) -> str:
    """Quote s as Go's %q does, for the error texts every client shares: in
    double quotes, with backslash escapes for quotes, backslashes, ASCII
    control characters and the bytes that were not UTF-8 (an environment
    variable's, decoded by os.environ with surrogateescape)."""
    out = ['"']
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        elif "\udc80" <= ch <= "\udcff":
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


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


@dataclass(frozen=True)
class Resolved:
    """Where a client connects and how: ``address`` as given (or
    default_addr()), the gRPC ``target``, the channel ``options`` and the
    ``tls`` configuration (None: plaintext)."""

    address: str
    target: str
    options: list[tuple[str, Any]]
    tls: TLSConfig | None
    autostart: Any = None
    """The savepoint._autostart.Autostart that started, and restarts, the
    daemon on demand; None when the caller chose the address or it is off."""
    start_pending: bool = False
    """With resolve(defer_start=True): nothing answered yet, and the caller
    is to call autostart.start() before its first call."""

    def channel(self) -> grpc.Channel:
        """A new grpc channel to the daemon."""
        if self.tls is None:
            return grpc.insecure_channel(self.target, options=self.options)
        return grpc.secure_channel(self.target, self.tls.credentials(), options=self.options)

    def aio_channel(self) -> grpc.aio.Channel:
        """A new grpc.aio channel to the daemon, for the running event loop."""
        import grpc.aio  # only the asyncio clients pay for its import

        if self.tls is None:
            return grpc.aio.insecure_channel(self.target, options=self.options)
        return grpc.aio.secure_channel(self.target, self.tls.credentials(), options=self.options)


def resolve(
    address: str | None, tls: TLSConfig | bool | None, extra_options: Sequence[tuple[str, Any]] = (), *, defer_start: bool = False
) -> Resolved:
    """Resolve a client's ``address`` and ``tls`` arguments as every Savepoint
    client takes them: None for the default address; for tls, None takes
    TLS from the environment (TLSConfig.from_env), True the same or else the
    system's roots, False plaintext, a TLSConfig itself. ``extra_options``
    are appended to the channel options. With no address chosen (None, and
    no SAVEPOINT_ADDR) and nothing answering at the per-user default,
    savepointd is started there on demand first (savepoint._autostart);
    with ``defer_start`` that start is left to the caller (start_pending),
    which the asyncio client runs in a worker thread at its first call."""
    auto = None
    pending = False
    if not address:
        from savepoint._autostart import Autostart

        auto = Autostart.from_env()
        if auto is not None:
            address = auto.probe() if defer_start else auto.ensure()
            if address is None:
                address, pending = auto.addr, True
            elif address != auto.addr:  # the system's daemon: nothing to start, now or later
                auto = None
    addr = address or default_addr()
    ep = parse_addr(addr)
    cfg: TLSConfig | None
    if tls is True or tls is None:
        cfg = TLSConfig.from_env()
        if tls is True and cfg is None:
            cfg = TLSConfig()
    elif tls is False:
        cfg = None
    else:
        cfg = tls
    return Resolved(addr, ep.target, [*channel_args(ep, cfg), *extra_options], cfg, auto, pending)

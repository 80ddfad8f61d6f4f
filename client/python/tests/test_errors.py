"""The reason-to-class table against the generated ErrorReason enum and the
proto's documented codes, and the translation of statuses."""

from __future__ import annotations

import re

import grpc
import pytest
from conftest import REPO
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

import savepoint
from savepoint import errors
from savepoint.v1 import savepoint_pb2 as pb

PROTO = REPO / "proto" / "savepoint" / "v1" / "savepoint.proto"


def test_every_reason_has_a_class() -> None:
    missing = [
        name
        for name, value in pb.ErrorReason.items()
        if value != pb.ERROR_REASON_UNSPECIFIED and value not in errors.REASON_CLASSES
    ]
    assert not missing, f"ErrorReason values without an exception class in savepoint.errors: {missing}"
    assert pb.ERROR_REASON_UNSPECIFIED not in errors.REASON_CLASSES
    # One class per reason: no two reasons share a class.
    classes = list(errors.REASON_CLASSES.values())
    assert len(set(classes)) == len(classes)


def test_reason_names() -> None:
    assert errors.reason_name(pb.ERROR_REASON_SESSION_FENCED) == "SESSION_FENCED"
    assert errors.error_class("SESSION_FENCED", grpc.StatusCode.ABORTED) is savepoint.SessionFencedError
    assert errors.error_class("REQUEST_TOO_LARGE", grpc.StatusCode.RESOURCE_EXHAUSTED) is savepoint.RequestTooLargeError
    assert errors.error_class("INVALID_UTF8", grpc.StatusCode.INVALID_ARGUMENT) is savepoint.InvalidUtf8Error


def _documented_codes() -> dict[str, str]:
    """reason -> the gRPC code its proto comment starts with."""
    text = PROTO.read_text()
    body = text[text.index("enum ErrorReason {") :]
    body = body[: body.index("\n}")]
    out = {}
    comment: list[str] = []
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("//"):
            comment.append(line[2:].strip())
            continue
        m = re.match(r"(ERROR_REASON_\w+) = \d+;", line)
        if m:
            c = re.match(r"([A-Z_]+):", " ".join(comment))
            if m.group(1) != "ERROR_REASON_UNSPECIFIED":
                assert c, f"{m.group(1)}: its comment does not start with a gRPC code"
                out[m.group(1).removeprefix("ERROR_REASON_")] = c.group(1)
        comment = []
    return out


def test_classes_are_grouped_by_documented_code() -> None:
    codes = _documented_codes()
    assert len(codes) == len(pb.ErrorReason.keys()) - 1
    for reason, code in codes.items():
        cls = errors.error_class(reason, None)
        is_invalid = issubclass(cls, savepoint.InvalidArgumentError)
        assert is_invalid == (code == "INVALID_ARGUMENT"), f"{reason} ({code}) -> {cls.__name__}"
        assert issubclass(cls, savepoint.SavepointError)
    # Every reason whose ErrorInfo names a field is a FieldError.
    for name in ("INVALID_SESSION_ID", "INVALID_JSON", "FIELD_TOO_LARGE", "INVALID_UTF8", "MISSING_FIELD"):
        assert issubclass(errors.error_class(name, None), savepoint.FieldError)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, bytes], ...] = ()) -> None:
        self._code, self._details, self._trailing = code, details, trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        return self._trailing


def status_with(code: grpc.StatusCode, reason: str, domain: str = errors.DOMAIN, **md: str) -> FakeRpcError:
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain=domain, metadata=md))
    st = status_pb2.Status(code=code.value[0], message="msg", details=[info])
    return FakeRpcError(code, "msg", (("grpc-status-details-bin", st.SerializeToString()),))


@pytest.mark.parametrize("value", [v for v in pb.ErrorReason.values() if v != pb.ERROR_REASON_UNSPECIFIED])
def test_translate_each_reason(value: int) -> None:
    reason = errors.reason_name(value)
    e = errors.from_rpc_error(status_with(grpc.StatusCode.ABORTED, reason, current_revision="7", current_epoch="3"))
    assert type(e) is errors.REASON_CLASSES[value]
    assert (e.reason, e.code, e.current_revision, e.current_epoch) == (reason, grpc.StatusCode.ABORTED, 7, 3)
    assert e.metadata == {"current_revision": "7", "current_epoch": "3"}
    assert str(e) == f"savepoint: {reason} (ABORTED): msg."


@pytest.mark.parametrize(
    ("err", "want"),
    [
        (errors.SavepointError("tool uses still pending; answer them with point_b first"),
         "savepoint: tool uses still pending; answer them with point_b first."),
        (errors.SavepointError("it failed."), "savepoint: it failed."),
        (errors.SavepointError("", code=grpc.StatusCode.INTERNAL), "savepoint: INTERNAL."),
        (errors.SavepointError("note: ", code=grpc.StatusCode.INTERNAL, reason="INTERNAL"), "savepoint: INTERNAL (INTERNAL): note."),
        (errors.SavepointError("x").with_context("loading it"), "loading it: savepoint: x."),
        (errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last error: UNKNOWN: unix:/x: No such file or directory")),
         "savepoint: UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: unix:/x: No such file or directory. " + errors.UNREACHABLE_HINT),
        (errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "")), "savepoint: UNAVAILABLE: " + errors.UNREACHABLE_HINT),
    ],
)
def test_text_ends_in_a_sentence(err: errors.SavepointError, want: str) -> None:
    assert str(err) == want


@pytest.mark.parametrize(
    ("err", "cls", "reason"),
    [
        # No ErrorInfo: by code.
        (FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused"), savepoint.UnavailableError, ""),
        (FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "bad"), savepoint.InvalidArgumentError, ""),
        (FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"), savepoint.DeadlineExceededError, ""),
        (FakeRpcError(grpc.StatusCode.CANCELLED, "gone"), savepoint.CanceledError, ""),
        (FakeRpcError(grpc.StatusCode.PERMISSION_DENIED, "no"), savepoint.SavepointError, ""),
        # An unknown reason falls back to its code's class.
        (status_with(grpc.StatusCode.INVALID_ARGUMENT, "SOMETHING_NEW"), savepoint.InvalidArgumentError, "SOMETHING_NEW"),
        # Another domain's ErrorInfo is not ours.
        (status_with(grpc.StatusCode.ABORTED, "SESSION_FENCED", domain="other.v1"), savepoint.SavepointError, ""),
        # Undecodable details carry no reason.
        (FakeRpcError(grpc.StatusCode.UNAVAILABLE, "x", (("grpc-status-details-bin", b"\xff\xff"),)), savepoint.UnavailableError, ""),
    ],
)
def test_translate_fallbacks(err: FakeRpcError, cls: type, reason: str) -> None:
    e = errors.from_rpc_error(err)
    assert type(e) is cls
    assert e.reason == reason
    assert e.current_revision == 0 and e.current_epoch == 0


def test_field_and_context() -> None:
    e = errors.from_rpc_error(status_with(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_JSON", field="state_json"))
    assert isinstance(e, savepoint.FieldError) and e.field == "state_json"
    c = e.with_context("turn 3")
    assert type(c) is type(e) and c.field == "state_json" and c.__cause__ is e
    assert str(c) == "turn 3: savepoint: INVALID_JSON (INVALID_ARGUMENT): msg."


def test_outcome_unknown() -> None:
    assert errors.outcome_unknown(errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down")))
    assert errors.outcome_unknown(errors.from_rpc_error(status_with(grpc.StatusCode.INTERNAL, "INTERNAL")))
    assert errors.outcome_unknown(errors.from_rpc_error(status_with(grpc.StatusCode.UNAVAILABLE, "COMMIT_OUTCOME_UNKNOWN")))
    assert isinstance(errors.from_rpc_error(status_with(grpc.StatusCode.UNAVAILABLE, "COMMIT_OUTCOME_UNKNOWN")), errors.UnavailableError)
    assert isinstance(errors.from_rpc_error(status_with(grpc.StatusCode.UNAVAILABLE, "NO_WRITABLE_HOST")), errors.NoWritableHostError)
    assert errors.outcome_unknown(RuntimeError("interrupted"))
    assert not errors.outcome_unknown(errors.from_rpc_error(status_with(grpc.StatusCode.ABORTED, "REVISION_MISMATCH")))
    assert not errors.outcome_unknown(savepoint.ToolUsesPendingError("local"))


def test_every_documented_reason_has_a_class() -> None:
    """Every reason docs/api.md documents (the daemon's table) maps to its own
    class, and INVALID_ARGUMENT ones to an InvalidArgumentError."""
    text = (REPO / "docs" / "api.md").read_text()
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|(?: `([A-Z_]+)` \|)?", text, re.M)
    assert len(rows) >= 30, rows
    for reason, code in rows:
        cls = errors.error_class(reason, None)
        assert cls is not savepoint.SavepointError, f"{reason} has no class"
        if code == "INVALID_ARGUMENT" or not code:  # the field reasons' table has no code column
            assert issubclass(cls, savepoint.InvalidArgumentError), reason

"""What the sync and asyncio Sessions share: the bookkeeping of one session
(revision, epoch, history, metadata, pending tool uses, the save whose outcome
is unknown) and every decision that needs no I/O. The two Session classes only
drive the calls: the operations of several calls are written once, as
Steps (savepoint._steps)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration

from savepoint import errors
from savepoint._steps import Step, Steps, delete_steps, history_steps, q
from savepoint.errors import (
    AlreadyRunError,
    CallNotPendingError,
    NotRunError,
    ResultsMismatchError,
    SavepointError,
    SessionCompletedError,
    SessionExistsError,
    SessionFencedError,
    ToolNameMismatchError,
    ToolUsesPendingError,
)
from savepoint.types import (
    Decision,
    EffectClass,
    SessionStatus,
    LedgerErrorHandler,
    Message,
    Registration,
    ToolEvent,
    ToolHook,
    ToolResult,
    ToolResultsFunc,
    ToolStage,
    ToolUse,
    Verified,
    VerifyStatus,
    anthropic_tool_results,
    normalize_content,
    tool_content,
    tool_output,
)
from savepoint.v1 import savepoint_pb2 as pb

RECORD_TIMEOUT = 30.0
"""Seconds a RecordEffect may take. It runs even when the caller's deadline
has passed: the tool ran, and its outcome is a fact worth keeping."""

LOGGER = logging.getLogger("savepoint")


@dataclass
class Options:
    """The client options a Session uses."""

    tool_results: ToolResultsFunc = anthropic_tool_results
    tool_hook: ToolHook | None = None
    on_ledger_error: LedgerErrorHandler | None = None
    logger: logging.Logger = LOGGER
    approval_required: frozenset[str] = frozenset()


@dataclass
class Meta:
    """What each save sends whole and the session keeps between saves."""

    task: str = ""
    turn: int = 0
    tokens_used: int = 0
    state_json: str = ""
    labels: dict[str, str] = field(default_factory=dict)


class _Unset:
    pass


UNSET = _Unset()


class SessionState:
    """The state and I/O-free logic of a Session."""

    def __init__(self, opts: Options, session_id: str) -> None:
        self._opts = opts
        self._id = session_id
        self._revision = 0
        self._epoch = 0
        self._meta = Meta()
        self._messages: list[Message] = []
        self._count = 0
        self._pending: list[pb.ToolUse] = []
        self._failed: pb.SaveCheckpointRequest | None = None  # last save whose outcome is unknown
        self._started: set[str] = set()  # pending tool uses this process began or ran
        self._ran: dict[str, ToolResult] = {}  # their results, once run
        self._status = SessionStatus.ACTIVE
        self._output = ""  # the final output, once completed or failed

    # -- getters -----------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self._id

    @property
    def revision(self) -> int:
        """The revision the session's last save made or loaded."""
        return self._revision

    @property
    def epoch(self) -> int:
        """The epoch the session owns."""
        return self._epoch

    @property
    def message_count(self) -> int:
        """The number of messages in the history, as the daemon counted them."""
        return self._count

    @property
    def task(self) -> str:
        return self._meta.task

    @property
    def turn(self) -> int:
        """The turn counter: point_a counts one turn."""
        return self._meta.turn

    @property
    def tokens_used(self) -> int:
        return self._meta.tokens_used

    @property
    def state_json(self) -> str:
        """The opaque client state, "" when none."""
        return self._meta.state_json

    @property
    def labels(self) -> dict[str, str]:
        """A copy of the labels."""
        return dict(self._meta.labels)

    @property
    def messages(self) -> list[Message]:
        """A copy of the whole history as the session knows it, ready to send
        to the model."""
        return list(self._messages)

    @property
    def pending(self) -> list[ToolUse]:
        """The pending tool uses, in the order they were named."""
        return [ToolUse.from_proto(p) for p in self._pending]

    @property
    def status(self) -> SessionStatus:
        """The session's status as last loaded or set by complete."""
        return self._status

    @property
    def final_output(self) -> str:
        """The output complete stored; "" while the session is active."""
        return self._output

    def add_tokens(self, n: int) -> None:
        """Add n to the tokens used, sent with the next save."""
        self._meta.tokens_used += n

    # -- loading -------------------------------------------------------------

    def _load(self, resp: pb.ResumeResponse, msgs: list[Message]) -> None:
        cp = resp.checkpoint
        self._revision = cp.revision
        self._epoch = resp.epoch
        self._meta = Meta(
            task=cp.task,
            turn=cp.turn,
            tokens_used=cp.tokens_used,
            state_json=cp.state_json,
            labels=dict(cp.labels),
        )
        self._messages = msgs
        self._count = cp.message_count
        self._pending = [_copy(p) for p in cp.pending_tool_uses]
        self._status = SessionStatus(cp.status or SessionStatus.ACTIVE)
        self._output = cp.final_output

    # -- saves -----------------------------------------------------------------

    def _save_request(
        self, m: Meta, keep: int | None, app: Sequence[Message], pending: Sequence[pb.ToolUse]
    ) -> pb.SaveCheckpointRequest:
        req = pb.SaveCheckpointRequest(
            session_id=self._id,
            expected_revision=self._revision,
            epoch=self._epoch,
            task=m.task,
            turn=m.turn,
            tokens_used=m.tokens_used,
            pending_tool_uses=list(pending),
            state_json=m.state_json,
            labels=m.labels,
            append_messages=[pb.Message(role=x.role, content_json=x.content_json) for x in app],
        )
        if keep is not None:
            req.keep_messages = keep
        req.request_id = self._request_id(req)
        return req

    def _request_id(self, req: pb.SaveCheckpointRequest) -> str:
        """The request_id of a save: the failed save's when this is the same
        save tried again (so the daemon applies it once), else a new UUID."""
        if self._failed is not None:
            prev = pb.SaveCheckpointRequest()
            prev.CopyFrom(self._failed)
            prev.request_id = ""
            if prev == req:
                return self._failed.request_id
        return str(uuid.uuid4())

    def _save_failed(self, req: pb.SaveCheckpointRequest, err: BaseException) -> None:
        self._failed = req if errors.outcome_unknown(err) else None

    def _save_done(
        self,
        m: Meta,
        keep: int | None,
        app: Sequence[Message],
        pending: Sequence[pb.ToolUse],
        resp: pb.SaveCheckpointResponse,
    ) -> None:
        self._failed = None
        self._revision = resp.revision
        self._epoch = resp.epoch
        self._meta = m
        if keep is not None and keep < len(self._messages):
            self._messages = self._messages[:keep]
        self._messages.extend(app)
        self._count = resp.message_count
        if self._count != len(self._messages):
            self._opts.logger.error(
                "savepoint: the daemon's message count differs from the history this session holds "
                "(session=%s revision=%d daemon=%d client=%d)",
                self._id, self._revision, self._count, len(self._messages),
            )
        if list(self._pending) != list(pending):
            self._pending = list(pending)
            self._started.clear()
            self._ran.clear()

    def _point_a(self, calls: Sequence[ToolUse]) -> tuple[Meta, list[pb.ToolUse]]:
        if self._pending:
            raise ToolUsesPendingError("tool uses still pending; answer them with point_b first")
        m = replace(self._meta, labels=dict(self._meta.labels))
        m.turn += 1
        return m, [c.to_proto() for c in calls]

    def _point_b_order(self, results: Sequence[ToolResult]) -> list[ToolResult] | None:
        """Check that results answer every pending tool use exactly once and
        return them in the order the tool uses were named; None when there is
        nothing to do."""
        if not self._pending and not results:
            return None
        by_id: dict[str, ToolResult] = {}
        for r in results:
            if r.tool_use_id in by_id:
                raise ResultsMismatchError(f"tool results do not answer the pending tool uses exactly once: tool use {q(r.tool_use_id)} answered twice")
            by_id[r.tool_use_id] = r
        ordered = []
        for p in self._pending:
            if p.tool_use_id not in by_id:
                raise ResultsMismatchError(
                    f"tool results do not answer the pending tool uses exactly once: no result for tool use {q(p.tool_use_id)} ({p.name})"
                )
            ordered.append(by_id[p.tool_use_id])
        if len(ordered) != len(results):
            raise ResultsMismatchError(
                f"tool results do not answer the pending tool uses exactly once: {len(results)} results for {len(self._pending)} pending tool uses"
            )
        return ordered

    def _rerecord_check(self, i: int, r: ToolResult) -> pb.ToolUse:
        """For a result with a ledger error, check that it is the outcome this
        session's tool returned ("execute first, record after") and return its
        pending tool use."""
        p = self._pending[i]
        ran = self._ran.get(r.tool_use_id)
        if ran is None or ran.content != r.content or ran.is_error != r.is_error:
            raise NotRunError(
                f"point_b: tool use {q(r.tool_use_id)} ({p.name}) has a ledger error but its result is not the one "
                "this session's tool returned: result not produced by running the tool"
            )
        return p

    def _results_messages(self, ordered: Sequence[ToolResult]) -> list[Message]:
        try:
            return self._opts.tool_results(ordered)
        except Exception as e:
            raise SavepointError(f"point_b: making the tool result messages: {e}") from e

    def _save_options(
        self,
        task: str | None,
        turn: int | None,
        tokens_used: int | None,
        state_json: str | None,
        labels: Mapping[str, str] | None,
        keep_messages: int | None,
        append: Sequence[Message],
    ) -> Meta:
        if self._pending and (append or keep_messages is not None):
            raise ToolUsesPendingError("tool uses still pending; answer them with point_b first")
        m = replace(self._meta, labels=dict(self._meta.labels))
        if task is not None:
            m.task = task
        if turn is not None:
            m.turn = turn
        if tokens_used is not None:
            m.tokens_used = tokens_used
        if state_json is not None:
            m.state_json = state_json
        if labels is not None:
            m.labels = dict(labels)
        return m

    def _save_steps(self, m: Meta, keep: int | None, app: Sequence[Message], pending: Sequence[pb.ToolUse]) -> Steps[None]:
        """The one place a Session writes a revision: the whole meta, on the
        session's revision, under its epoch. A save whose outcome is unknown
        keeps its request_id for the same save tried again."""
        req = self._save_request(m, keep, app, pending)
        try:
            resp = yield Step("SaveCheckpoint", req)
        except BaseException as e:
            self._save_failed(req, e)
            raise
        self._save_done(m, keep, app, pending, resp)

    def _start_steps(self, m: Meta, messages: Sequence[Message], replace: bool) -> Steps[None]:
        """Create the session with ``messages``; an existing one raises
        SessionExistsError unless ``replace``, which deletes it first."""
        try:
            try:
                yield from self._save_steps(m, None, messages, [])
            except (SessionFencedError, SessionCompletedError) as e:
                # A create carries epoch 0, which the daemon fences once the
                # existing session has been resumed, and refuses on a
                # completed session: either way the session exists.
                raise exists_error(self._id, e) from e
        except SessionExistsError:
            if not replace:
                raise
            try:
                yield from delete_steps(self._id)
            except SavepointError as e:
                raise e.with_context(f"replacing session {q(self._id)}") from e
            yield from self._save_steps(m, None, messages, [])

    def _resume_steps(self, reopen: bool = False) -> Steps[None]:
        """Take ownership of the session and load it whole; ``reopen`` makes
        a completed or failed session active again."""
        r = yield Step("Resume", pb.ResumeRequest(session_id=self._id, reopen=reopen))
        self._load(r, (yield from history_steps(self._id, r.checkpoint, r.next_page_token)))

    def _point_b_steps(self, results: Sequence[ToolResult]) -> Steps[None]:
        """point_b: record once more each result whose outcome missed the
        ledger, then save the results' messages with nothing pending."""
        ordered = self._point_b_order(results)
        if ordered is None:
            return
        for i, r in enumerate(ordered):
            if r.ledger_error is not None:
                p = self._rerecord_check(i, r)
                try:
                    yield Step("RecordEffect", self._record_request(p, r), RECORD_TIMEOUT)
                except SavepointError as e:
                    self._report_ledger_error(p, r, e)
                else:
                    ordered[i] = replace(r, ledger_error=None)
        yield from self._save_steps(self._meta, None, self._results_messages(ordered), [])

    def _complete_steps(self, status: SessionStatus, final_output: str) -> Steps[None]:
        """Mark the session COMPLETED or FAILED with its final output, under
        its epoch; the request id makes a retry apply it once."""
        req = pb.CompleteSessionRequest(
            session_id=self._id, epoch=self._epoch, status=int(status), final_output=final_output, request_id=str(uuid.uuid4())  # type: ignore[arg-type]
        )
        resp = yield Step("CompleteSession", req)
        self._status, self._output = SessionStatus(resp.status), final_output

    def _reconcile_steps(self, rev: int) -> Steps[list[pb.Resolution]]:
        """Every page of Reconcile's resolutions, checked to be of revision
        ``rev``."""
        resolutions: list[pb.Resolution] = []
        token = ""
        while True:
            resp = yield Step("Reconcile", pb.ReconcileRequest(session_id=self._id, page_token=token))
            if resp.revision != rev:
                raise reconcile_mismatch(rev, resp.revision)
            resolutions.extend(resp.resolutions)
            token = resp.next_page_token
            if not token:
                return resolutions

    def _register_request(self, call: ToolUse) -> pb.BeginEffectRequest:
        p = call.to_proto()
        p.begin_tracked = True
        p.tool_use_id = ""
        return pb.BeginEffectRequest(
            session_id=self._id, tool_use_id=call.tool_use_id, epoch=self._epoch, tool_use=p, request_id=str(uuid.uuid4())
        )

    @staticmethod
    def _registration(resp: pb.BeginEffectResponse) -> Registration:
        return Registration(
            idempotency_key=resp.idempotency_key,
            already_begun=resp.already_begun,
            effect=resp.effect if resp.HasField("effect") else None,
            duplicate=resp.duplicate if resp.HasField("duplicate") else None,
        )

    def _tool_use_record_request(self, tool_use_id: str, output: str, is_error: bool, refused: bool) -> pb.RecordEffectRequest:
        return pb.RecordEffectRequest(session_id=self._id, tool_use_id=tool_use_id, output=output, is_error=is_error or refused, refused=refused)

    def _ledger_reconcile_steps(self, ids: Sequence[str]) -> Steps[list[pb.Resolution]]:
        """Every page of Reconcile's resolutions of the tool uses ids."""
        resolutions: list[pb.Resolution] = []
        token = ""
        while True:
            resp = yield Step("Reconcile", pb.ReconcileRequest(session_id=self._id, tool_use_ids=list(ids), page_token=token))
            resolutions.extend(resp.resolutions)
            token = resp.next_page_token
            if not token:
                return resolutions

    # -- tools -------------------------------------------------------------------

    def _pending_call(self, tool_use_id: str) -> pb.ToolUse | None:
        for p in self._pending:
            if p.tool_use_id == tool_use_id:
                return p
        return None

    def _claim(self, call: ToolUse) -> tuple[pb.ToolUse, int]:
        """Mark a pending tool use as started by run_tool, or raise why it may
        not run; return it with the epoch to begin it under."""
        p = self._pending_call(call.tool_use_id)
        if p is None:
            raise CallNotPendingError(f"tool use {q(call.tool_use_id)} ({call.name}) not run: tool use not pending: name it with point_a first")
        if call.name != p.name:
            raise ToolNameMismatchError(f"tool use {q(call.tool_use_id)} not run: tool name mismatch: named {q(p.name)} at point_a, {q(call.name)} here")
        if call.tool_use_id in self._started:
            raise AlreadyRunError(f"tool use {q(call.tool_use_id)} ({call.name}) not run again: tool use already run by this session")
        self._started.add(call.tool_use_id)
        return p, self._epoch

    def _guard(self) -> AbstractContextManager[object]:
        """The lock over the tool bookkeeping (_started, _ran): the sync
        Session's lock; none for the asyncio one, whose steps between awaits
        cannot interleave."""
        return contextlib.nullcontext()

    def _decide(self, res: pb.Resolution, can_run: bool) -> ToolResult | pb.ToolUse:
        """Act on one of Reconcile's resolutions without I/O: the result for
        REUSE, IN_DOUBT and a tool this session already ran, or the pending
        tool use to run (marked started) for RUN. ``can_run`` says whether a
        run function was given; RUN without one raises."""
        tu = res.tool_use
        tid = tu.tool_use_id
        log = self._opts.logger
        self._event(ToolStage.DECIDED, tu, decision=Decision(res.decision), begun=res.begun)
        if res.decision == pb.DECISION_REUSE:
            log.info("savepoint: reconcile: outcome recorded, reusing it, not running the tool (session=%s tool_use_id=%s)", self._id, tid)
            out = res.effect.output
            return ToolResult(tool_use_id=tid, content=out if res.effect.is_error else tool_content(out), is_error=res.effect.is_error)
        if res.decision == pb.DECISION_IN_DOUBT:
            log.warning("savepoint: reconcile: outcome unknown, not running the tool, answering with an is_error result (session=%s tool_use_id=%s name=%s)", self._id, tid, tu.name)
            return ToolResult(tool_use_id=tid, content=res.tool_result_text, is_error=True)
        if res.decision != pb.DECISION_RUN:
            raise SavepointError(f"reconcile: tool use {q(tid)}: unknown decision {res.decision}")
        with self._guard():
            p = self._pending_call(tid)
            prev = self._ran.get(tid)
            started = tid in self._started
            if prev is None and p is not None and not started and can_run:
                self._started.add(tid)
        if prev is not None:
            log.info("savepoint: reconcile: this session ran the tool already, reusing its result (session=%s tool_use_id=%s)", self._id, tid)
            return prev
        if p is None:
            raise CallNotPendingError(f"reconcile: tool use {q(tid)} is not pending in this session: tool use not pending")
        if started:
            raise AlreadyRunError(f"reconcile: tool use {q(tid)} ({tu.name}) not run: tool use already run by this session")
        if not can_run:
            raise SavepointError(f"reconcile: tool use {q(tid)} ({tu.name}) must run, but no run function was given")
        log.info("savepoint: reconcile: safe to run, running the tool (session=%s tool_use_id=%s)", self._id, tid)
        return p

    # -- verify hooks ----------------------------------------------------------

    def _verify_failed(self, res: pb.Resolution, e: BaseException) -> None:
        self._opts.logger.warning(
            "savepoint: reconcile: verify failed; the outcome stays unknown (session=%s tool_use_id=%s): %s", self._id, res.tool_use.tool_use_id, e
        )

    def _definite(self, res: pb.Resolution, v: object) -> Verified | None:
        """v if it says DONE or NOT_DONE, else None (logged): the tool use
        stays in doubt."""
        if isinstance(v, Verified) and v.status in (VerifyStatus.DONE, VerifyStatus.NOT_DONE):
            return v
        self._opts.logger.warning(
            "savepoint: reconcile: verify could not tell; the outcome stays unknown (session=%s tool_use_id=%s)", self._id, res.tool_use.tool_use_id
        )
        return None

    def _resolve_request(self, res: pb.Resolution, epoch: int, v: Verified) -> pb.ResolveEffectRequest:
        """The ResolveEffect recording v, fenced by epoch, with a fresh
        request id so that a retry is answered as the first try."""
        done = v.status == VerifyStatus.DONE
        req = pb.ResolveEffectRequest(
            session_id=self._id, tool_use_id=res.tool_use.tool_use_id, epoch=epoch,
            outcome=pb.RESOLUTION_OUTCOME_DONE if done else pb.RESOLUTION_OUTCOME_NOT_DONE,
            note=v.note, resolver_kind=pb.RESOLVER_KIND_VERIFY, resolved_by="verify", request_id=str(uuid.uuid4()),
        )
        if done:
            req.output, req.is_error = tool_output(v.output), v.is_error
        return req

    def _after_verify(self, res: pb.Resolution, resp: pb.ResolveEffectResponse, v: Verified) -> ToolResult | pb.Resolution:
        """What reconcile does once v is recorded: DONE's result (REUSE), or
        the resolution to act on as RUN for NOT_DONE."""
        tid = res.tool_use.tool_use_id
        if v.status == VerifyStatus.DONE:
            self._opts.logger.info("savepoint: reconcile: verify found the tool use done; its output is recorded and reused (session=%s tool_use_id=%s)", self._id, tid)
            eff = resp.entry.effect
            out = eff.output
            return ToolResult(tool_use_id=tid, content=out if eff.is_error else tool_content(out), is_error=eff.is_error, decision=Decision.REUSE)
        self._opts.logger.info("savepoint: reconcile: verify found the tool use not done; running it again with its key (session=%s tool_use_id=%s)", self._id, tid)
        run = pb.Resolution()
        run.CopyFrom(res)
        run.decision = pb.DECISION_RUN
        run.tool_result_text = ""
        return run

    def _unstart(self, tid: str) -> None:
        with self._guard():
            self._started.discard(tid)

    @staticmethod
    def _duplicate_result(p: pb.ToolUse, d: pb.DuplicateToolUse) -> ToolResult:
        """The result of a call the daemon's duplicate-intent guard caught:
        not run, answered with the daemon's text."""
        return duplicate_result(p.tool_use_id, d)

    def _requires_approval(self, p: pb.ToolUse) -> bool:
        return p.name in self._opts.approval_required

    def require_approval(self, names: Sequence[str] | frozenset[str]) -> None:
        """Make this session's begins ask for a person's approval of the
        tools named too, beside its client's approval_required: for an
        integration that declares its own (savepoint.anthropic's
        ``approval_required``)."""
        if names:
            self._opts = replace(self._opts, approval_required=self._opts.approval_required | frozenset(names))

    def _begin_request(self, p: pb.ToolUse, epoch: int) -> pb.BeginEffectRequest:
        # The request id makes a retry after a lost answer get the first one.
        return pb.BeginEffectRequest(
            session_id=self._id, tool_use_id=p.tool_use_id, epoch=epoch, requires_approval=self._requires_approval(p),
            request_id=str(uuid.uuid4()),
        )

    def _gated(self, p: pb.ToolUse, resp: pb.BeginEffectResponse) -> ToolResult | None:
        """None when the begin began p; else, for a call that waits for
        approval, raise AwaitingApprovalError (p is no longer started), and
        for a denied one return its result: the approver's note, is_error,
        decision DENIED, which the caller records as refused."""
        if resp.decision == pb.DECISION_AWAIT_APPROVAL:
            self._unstart(p.tool_use_id)
            raise errors.AwaitingApprovalError(
                f"tool use {q(p.tool_use_id)} ({p.name}) of session {q(self._id)} not run: it waits for approval "
                f"(savepoint approve {self._id} {p.tool_use_id})",
                call=ToolUse.from_proto(p), approval=resp.approval,
            )
        if resp.decision == pb.DECISION_DENIED:
            return ToolResult(tool_use_id=p.tool_use_id, content=denied_text(resp.approval), is_error=True, decision=Decision.DENIED)
        return None

    def _refused_request(self, p: pb.ToolUse, r: ToolResult) -> pb.RecordEffectRequest:
        return pb.RecordEffectRequest(session_id=self._id, tool_use_id=p.tool_use_id, name=p.name, output=tool_output(r.content), is_error=True, refused=True)

    def _begin_failed(self, p: pb.ToolUse, err: SavepointError) -> SavepointError:
        """Forget that p was started (its BeginEffect failed, so it did not
        run) and return the error to raise."""
        self._unstart(p.tool_use_id)
        return err.with_context(f"tool use {q(p.tool_use_id)} ({p.name}) not run: BeginEffect")

    def _after_run(self, p: pb.ToolUse, output: object, exc: BaseException | None) -> tuple[ToolResult, SavepointError | None]:
        """The result of running p's tool, reported to the hook as RAN, with
        the error that keeps it from the ledger when the tool returned
        something that is neither text nor content blocks (its text then
        reaches the model, and the log says it was not recorded)."""
        r, bad = self._ran_result(p, output, exc)
        self._event(ToolStage.RAN, p, result=r)
        return r, bad

    def _record_request(self, p: pb.ToolUse, r: ToolResult) -> pb.RecordEffectRequest:
        return pb.RecordEffectRequest(
            session_id=self._id, tool_use_id=p.tool_use_id, name=p.name, output=tool_output(r.content), is_error=r.is_error,
            request_id=str(uuid.uuid4()),
        )

    def _after_record(self, p: pb.ToolUse, r: ToolResult, err: SavepointError | None) -> ToolResult:
        """Keep the result of a tool this session ran, with its ledger error
        when its RecordEffect failed (``err``), reported as such; else report
        it RECORDED."""
        if err is not None:
            r = replace(r, ledger_error=err.with_context(f"tool use {q(p.tool_use_id)} ({p.name}) ran but its outcome is not in the ledger"))
            self._report_ledger_error(p, r, err)
        else:
            self._event(ToolStage.RECORDED, p, result=r)
        with self._guard():
            self._ran[p.tool_use_id] = r
        return r

    def _hook(self, ev: ToolEvent) -> None:
        if self._opts.tool_hook is not None:
            self._opts.tool_hook(replace(ev, session_id=self._id))

    def _event(self, stage: ToolStage, p: pb.ToolUse, **kw: object) -> None:
        self._hook(ToolEvent(stage=stage, session_id=self._id, call=ToolUse.from_proto(p), **kw))  # type: ignore[arg-type]

    def _report_ledger_error(self, p: pb.ToolUse, r: ToolResult, err: BaseException) -> None:
        self._opts.logger.error(
            "savepoint: LEDGER WRITE FAILED: the tool ran, its side effect may have happened, and its outcome is not "
            "recorded; if the agent stops before point_b, resume will report this call as in doubt; check it by hand "
            "(session=%s tool_use_id=%s name=%s tool_is_error=%s err=%s)",
            self._id, p.tool_use_id, p.name, r.is_error, err,
        )
        if self._opts.on_ledger_error is not None:
            self._opts.on_ledger_error(ToolUse.from_proto(p), r, err)

    def _ran_result(self, p: pb.ToolUse, output: object, exc: BaseException | None) -> tuple[ToolResult, SavepointError | None]:
        if exc is not None:
            return ToolResult(tool_use_id=p.tool_use_id, content=str(exc), is_error=True), None
        try:
            return ToolResult(tool_use_id=p.tool_use_id, content=normalize_content(output)), None
        except (TypeError, ValueError) as e:
            return ToolResult(tool_use_id=p.tool_use_id, content=str(output)), SavepointError(f"the tool's output cannot be recorded: {e}")


def denied_text(a: pb.EffectApproval) -> str:
    """The tool result the model is given for a denied call."""
    by = a.decided_by or "a person"
    if not a.note:
        return f"This call was denied by {by}; it did not run."
    return f"This call was denied by {by}; it did not run. Their note: {a.note}"


def watch_request(
    label_filter: Mapping[str, str] | None,
    status_filter: SessionStatus | None,
    has_pending_tool_uses: bool,
    min_idle: float | timedelta | None,
    heartbeat_interval: float | timedelta | None,
) -> pb.WatchSessionsRequest:
    """The WatchSessionsRequest of Client.watch_sessions' arguments; the
    daemon checks them (InvalidArgumentError and its subclasses)."""
    req = pb.WatchSessionsRequest(
        label_filter=dict(label_filter or {}),
        status_filter=int(status_filter or SessionStatus.UNSPECIFIED),  # type: ignore[arg-type]
        has_pending_tool_uses=has_pending_tool_uses,
    )
    if min_idle is not None:
        req.min_idle.CopyFrom(duration(min_idle))
    if heartbeat_interval is not None:
        req.heartbeat_interval.CopyFrom(duration(heartbeat_interval))
    return req


def duration(d: float | timedelta) -> Duration:
    """A Duration of seconds or a timedelta, to the nanosecond."""
    out = Duration()
    if isinstance(d, timedelta):
        out.FromTimedelta(d)
    else:
        out.FromNanoseconds(round(d * 1e9))
    return out


def approve_request(
    session_id: str, tool_use_id: str, deny: bool, note: str, decided_by: str, input_digest: bytes
) -> pb.ApproveEffectRequest:
    """An ApproveEffect with a fresh request id, so that a retry is answered
    as the first try was."""
    return pb.ApproveEffectRequest(
        session_id=session_id, tool_use_id=tool_use_id,
        decision=pb.APPROVAL_STATUS_DENIED if deny else pb.APPROVAL_STATUS_APPROVED,
        input_digest=input_digest, decided_by=decided_by, note=note, request_id=str(uuid.uuid4()),
    )


def is_read_only(p: pb.ToolUse) -> bool:
    return EffectClass(p.effect_class).effective == EffectClass.READ_ONLY


def exists_error(session_id: str, e: SavepointError) -> SessionExistsError:
    """The SessionExistsError of a create that the daemon fenced or found
    completed: the session exists."""
    return SessionExistsError(f"session {q(session_id)} exists: {e.message}", code=e.code, reason=e.reason, metadata=e.metadata)


def reconcile_mismatch(rev: int, got: int) -> errors.RevisionMismatchError:
    return errors.RevisionMismatchError(
        f"reconcile: revision mismatch: the daemon's latest revision is {got}, this session's {rev}"
    )


def _copy(p: pb.ToolUse) -> pb.ToolUse:
    c = pb.ToolUse()
    c.CopyFrom(p)
    return c


def duplicate_result(tool_use_id: str, d: pb.DuplicateToolUse) -> ToolResult:
    """The answer to a call the daemon's duplicate-intent guard caught (docs/api.md
    "The same action under a new id"): not run; the daemon's text, the one
    wording every client gives the model, says the action was already taken
    under d.tool_use_id (with its output) or may have been (an error)."""
    return ToolResult(tool_use_id=tool_use_id, content=d.tool_result_text, is_error=d.is_error, duplicate_of=d.tool_use_id)

// Package client is the Go client of savepointd, the checkpoint daemon that
// lets an agent loop killed at any point resume without repeating a side
// effect it already performed and without pretending to know what it
// cannot.
//
// Dial connects; a Session does the protocol's bookkeeping (revision, epoch,
// history, pending tool uses, request ids), so an agent loop says only what
// happened:
//
//	s, err := c.Start(ctx, id, task, &client.StartOptions{Messages: prompt})
//	for {
//		reply := model(s.Messages())
//		s.PointA(ctx, reply.Message, reply.ToolUses) // the model named tools: save before running any
//		if len(reply.ToolUses) == 0 {
//			return reply.Text // the final answer, saved too
//		}
//		results, err := s.RunTools(ctx, reply.ToolUses, runTool) // begin, run, record each
//		s.PointB(ctx, results)                                  // answer them all: nothing pending
//	}
//
// After a crash, the same loop starts with Resume instead of Start, and
// answers what was pending when the process died:
//
//	s, err := c.Resume(ctx, id)
//	results, err := s.Reconcile(ctx, runTool) // reuse, run, or report in doubt
//	s.PointB(ctx, results)
//
// The order "execute first, record after" cannot be broken through a
// Session: RunTool (and Reconcile, for a tool that must run) is the only way
// it records an effect, and it records only the outcome the tool function
// returned. Before a tool that is not read-only runs, BeginEffect marks it as
// dispatched, so that after a crash the daemon can tell "never started" (run
// it) from "started, outcome unknown" (in doubt). A tool use in doubt need
// not stay so: ReconcileVerify asks a VerifyFunc (by the idempotency key the
// tool passed to the API it called, or by its input) whether it took effect
// and records the answer with ResolveEffect, and a person records theirs with
// Client.ResolveEffect or savepoint resolve. If the tool ran but its
// outcome could not be recorded, the real result is still returned (with
// ToolResult.LedgerErr set and an error logged): reporting a tool that ran as
// failed would make the model retry it and repeat the side effect.
//
// Errors are translated in one place from the google.rpc.ErrorInfo reason
// the daemon sends, never from message text: use errors.Is with the
// sentinels (ErrSessionFenced, ErrRevisionMismatch, ErrSessionNotFound, ...) and errors.As
// with *Error for the details. Calls that are safe to repeat are retried when
// the daemon is unavailable, waiting for the connection to come back (up to
// RetryPolicy.ReconnectWait, 5 s by default) so that the first call after a
// daemon restart succeeds; a retried SaveCheckpoint carries the same
// request_id, so the daemon applies it once. A request holding a string that
// is not valid UTF-8, which gRPC cannot encode, is never sent: it gets the
// daemon's own refusal, ErrInvalidArgument with reason INVALID_UTF8 and the
// field's path.
//
// A tool's effect class comes from the application's tool registry, never
// from the model; for an MCP tool, EffectClassFromMCP maps its annotations
// (readOnlyHint, idempotentHint) to one, as the Python and TypeScript
// clients do.
//
// WithToolHook observes each stage of a tool use (decided by Reconcile,
// begun, ran, recorded) without changing it, for logging, tracing, and
// crash tests that stop the process at an exact moment of the protocol.
//
// Tool results become history messages through a ToolResultsFunc; the
// default, AnthropicToolResults, makes the Anthropic Messages API's
// tool_result blocks. A tool that answers with content blocks (text, image,
// document) returns their JSON array, which ContentBlocks makes: the ledger
// stores it, and AnthropicToolResults sends it as the blocks, on the first
// run and on REUSE alike (ToolContent is the rule every client reads the
// ledger by). The raw gRPC client (Client.Raw) remains available
// for anything the Session does not cover.
package client

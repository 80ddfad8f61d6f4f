package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
)

func init() {
	register(&command{
		name:     "export",
		example:  `savepoint export report-1 --revision 2 > report-1.json`,
		synopsis: "SESSION [--revision N] | --thread THREAD",
		summary:  "print a session as JSON: the checkpoint with its whole history, and the reconcile view",
		help: `
Prints one revision of a session as a JSON object on stdout:

  checkpoint      the revision (savepoint.v1.Checkpoint in proto JSON, as
                  grpcurl prints it) with every message of its history in
                  "messages", however many ListMessages pages it takes
  latestRevision  the session's latest revision when it was read
  reconcile       what Reconcile decides for the pending tool uses
                  (savepoint.v1.ReconcileResponse, every page), with the
                  recorded effects; absent for an older --revision, since
                  Reconcile decides only the latest

--thread THREAD prints a LangGraph thread instead: {"threadId", "checkpoints"
(every checkpoint's savepoint.v1.GraphCheckpoint, newest first, without the
checkpoint's serialized value), "effects" (its ledger, savepoint.v1.
ThreadEffect each, outputs included)}.

It reads only: it takes no ownership and runs nothing.`,
		setup: setupExport,
	})
}

// export is the JSON object export prints; its fields hold proto JSON.
type export struct {
	Checkpoint     json.RawMessage `json:"checkpoint"`
	LatestRevision string          `json:"latestRevision"`
	Reconcile      json.RawMessage `json:"reconcile,omitempty"`
}

func setupExport(fs *flag.FlagSet) runFunc {
	revision := fs.Uint64("revision", 0, "the kept revision `N` to export (default: the latest)")
	thread := fs.String("thread", "", "export the graph thread `THREAD` instead of a session")
	return func(ctx context.Context, e *env, args []string) error {
		if *thread != "" {
			v, err := threadArg(ctx, e, args, *revision, *thread)
			if err != nil {
				return err
			}
			out, err := exportThread(v)
			if err != nil {
				return err
			}
			return printJSON(e.stdout, out)
		}
		id, err := sessionArg(args)
		if err != nil {
			return err
		}
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		v, err := loadView(ctx, c, id, *revision)
		if err != nil {
			return err
		}
		out := export{LatestRevision: strconv.FormatUint(v.latest, 10)}
		if out.Checkpoint, err = protojson.Marshal(v.checkpoint); err != nil {
			return err
		}
		if v.reconcile != nil {
			if out.Reconcile, err = protojson.Marshal(v.reconcile); err != nil {
				return err
			}
		}
		return printJSON(e.stdout, out)
	}
}

// printJSON writes v indented. protojson's spacing is deliberately
// unstable; the encoder re-indents the proto JSON v holds into a stable,
// readable document.
func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := buf.WriteTo(w)
	return err
}

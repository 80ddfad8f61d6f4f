package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"

	"github.com/savepoint-dev/savepoint/client"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

func init() {
	register(&command{
		name:     "approve",
		example:  `savepoint approve report-1 toolu_07 --note "checked the amount"`,
		synopsis: "(SESSION | --thread THREAD [--ns NS]) TOOL_USE_ID [--deny] [--note TEXT] [--by NAME] [--digest HEX]",
		summary:  "approve or deny a tool use that waits for approval",
		help: `
Approves a tool use that waits for a person's approval (ApproveEffect): a
call of a tool that requires approval, whose agent asked to begin it and
was told to wait ("savepoint ls" counts them under AWAITING, "savepoint
effects" lists them). The approval holds for that call and its input only,
and the agent's begin spends it: a crash and a replay never run the call a
second time, and a new call with the same input needs a new approval.

--deny denies it instead: the call does not run, and --note is the tool
result the model is given. The decision is kept with --note, --by (default:
your user name) and the daemon's time. The first decision stands: the same
one again succeeds and says so, the other one is refused.

--digest HEX approves only if the call waits with the input whose digest
"savepoint effects" showed you; a call that waits with other input is
refused.

--thread THREAD decides a call of a LangGraph thread's ledger instead
(ApproveThreadEffect), in namespace --ns (empty: the root graph).`,
		setup: setupApprove,
	})
}

func setupApprove(fs *flag.FlagSet) runFunc {
	deny := fs.Bool("deny", false, "deny the call: it does not run, and the note is the model's tool result")
	note := fs.String("note", "", "a `TEXT` kept with the decision; for --deny, what the model is told")
	by := fs.String("by", "", "who decides (default: your user name)")
	digest := fs.String("digest", "", "decide only if the call waits with the input of this digest `HEX`")
	call := callTargetFlags(fs, "decide")
	return func(ctx context.Context, e *env, args []string) error {
		if err := call.parse(args); err != nil {
			return err
		}
		a := client.Approval{Deny: *deny, Note: *note, DecidedBy: *by}
		if *digest != "" {
			d, err := hex.DecodeString(*digest)
			if err != nil || len(d) != 32 {
				return usagef("--digest wants the 64 hex digits of an input digest")
			}
			a.InputDigest = d
		}
		a.DecidedBy = byOrUser(a.DecidedBy)
		c, err := e.client(ctx)
		if err != nil {
			return err
		}
		var x *savepointv1.EffectApproval
		var name string
		var already bool
		if *call.thread != "" {
			r, err := c.ApproveThreadEffect(ctx, *call.thread, *call.ns, call.toolUseID, a)
			if err != nil {
				return err
			}
			x, name, already = r.GetEffect().GetApproval(), r.GetEffect().GetName(), r.GetAlreadyDecided()
		} else {
			r, err := c.ApproveEffect(ctx, call.session, call.toolUseID, a)
			if err != nil {
				return err
			}
			x, name, already = r.GetEntry().GetApproval(), r.GetEntry().GetName(), r.GetAlreadyDecided()
		}
		what := "is"
		if already {
			what = "was already"
		}
		fmt.Fprintf(e.stdout, "%s %s (%s) %s %s\n", call.where(), call.toolUseID, name, what, approvalText(x))
		if x.GetStatus() == savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED {
			_, err = fmt.Fprintln(e.stdout, "the call does not run; the model is given the note as its result")
		} else {
			_, err = fmt.Fprintln(e.stdout, "the agent's next begin of the call runs it, once")
		}
		return err
	}
}

// approvalText says where a call's approval is, who decided and when, as
// in "approved by alice at TIME for input 1a2b3c4d: note".
func approvalText(a *savepointv1.EffectApproval) string {
	dg := hex.EncodeToString(a.GetInputDigest())
	if len(dg) > 16 {
		dg = dg[:16]
	}
	var s string
	switch a.GetStatus() {
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_WAITING:
		return fmt.Sprintf("waiting for approval since %s, input %s", formatTime(a.GetRequestTime()), dg)
	case savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED:
		s = "denied"
	default:
		s = "approved"
		if a.GetSpent() {
			s = "approved (spent)"
		}
	}
	s = fmt.Sprintf("%s by %s at %s, input %s", s, orDash(a.GetDecidedBy()), formatTime(a.GetDecideTime()), dg)
	if n := a.GetNote(); n != "" {
		s += ": " + quoteLine(n)
	}
	return s
}

package badgerstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"google.golang.org/protobuf/types/known/timestamppb"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// active refuses a write that needs an active session when h is completed
// or failed.
func active(h *storagev1.SessionRecord, sessionID string) error {
	st := statusFromRecord(h)
	if st == core.StatusActive {
		return nil
	}
	return &core.StateError{Err: core.ErrSessionCompleted, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
		Msg: fmt.Sprintf("session %q is %s; resume it with reopen to continue it", sessionID, strings.ToLower(st.String()))}
}

// CompleteSession sets the head's status and final output; the revision
// stays. A request id is remembered like a save's, in the same records.
func (s *Store) CompleteSession(ctx context.Context, req *core.CompleteRequest) (core.CompleteResult, error) {
	if err := ctx.Err(); err != nil {
		return core.CompleteResult{}, err
	}
	defer s.lock(req.SessionID)()
	var res core.CompleteResult
	err := s.update(func(t *tx) error {
		sid := req.SessionID
		h, err := mustHead(t, sid)
		if err != nil {
			return err
		}
		fp := req.Fingerprint()
		prev, retry, err := sessionRequest(t, h, sid, req.RequestID, fp)
		if err != nil {
			return err
		}
		if retry {
			res = core.CompleteResult{Revision: prev.Revision, Epoch: prev.Epoch, Status: req.Status}
			return nil
		}
		if err := fence(h, sid, req.Epoch); err != nil {
			return err
		}
		res = core.CompleteResult{Revision: h.Revision, Epoch: h.Epoch, Status: req.Status}
		if st := statusFromRecord(h); st != core.StatusActive {
			if st == req.Status && h.FinalOutput == req.FinalOutput {
				res.Already = true
				return nil
			}
			return &core.StateError{Err: core.ErrSessionCompleted, CurrentRevision: h.Revision, CurrentEpoch: h.Epoch,
				Msg: fmt.Sprintf("session %q is %s already, with another status or final output; resume it with reopen to change it", sid, strings.ToLower(st.String()))}
		}
		now := timestamppb.New(s.now())
		h.Status, h.FinalOutput, h.CompleteTime = statusRecord(req.Status), req.FinalOutput, now
		h.UpdateTime = now
		if req.RequestID != "" {
			if err := put(t, requestKey(sid, req.RequestID), &storagev1.RequestRecord{
				RequestId: req.RequestID, Fingerprint: fp, Revision: res.Revision, Epoch: res.Epoch,
			}); err != nil {
				return err
			}
		}
		return put(t, sessionKey(sid), h)
	})
	return res, err
}

package badgerstore

import (
	"errors"

	"github.com/savepoint-dev/savepoint/daemon/core"

	storagev1 "github.com/savepoint-dev/savepoint/proto/savepoint/storage/v1"
)

// domainTxn is a tx seen as a core.Txn, for the protocol's write rules. It
// serves one session: it keeps the head it read, live or tombstone, to
// answer DeletedEpoch and to name the revision and epoch in a corruption
// error.
type domainTxn struct {
	t    *tx
	rec  *storagev1.SessionRecord // the live head as read, or nil
	tomb *storagev1.SessionRecord
}

var _ core.Txn = (*domainTxn)(nil)

func (d *domainTxn) Head(sid string) (*core.HeadRecord, error) {
	live, tomb, err := head(d.t, sid)
	if err != nil || live == nil {
		d.rec, d.tomb = nil, tomb
		return nil, err
	}
	d.rec, d.tomb = live, nil
	h := headFromRecord(live)
	return &h, nil
}

func (d *domainTxn) DeletedEpoch(sid string) (uint64, error) { return deletedEpoch(d.t, sid, d.tomb) }

// Create writes nothing: writes to one session are serialized by the
// store's session locks, so no other creator can run at the same time.
func (d *domainTxn) Create(string, *core.HeadRecord) error { return nil }

func (d *domainTxn) PutHead(sid string, h *core.HeadRecord) error {
	d.rec = headRecord(h)
	return put(d.t, sessionKey(sid), d.rec)
}

func (d *domainTxn) LedgerEntry(sid, toolUseID string) (*core.LedgerEntry, error) {
	var r storagev1.LedgerEntryRecord
	found, err := get(d.t, d.rec, sid, ledgerEntryKey(sid, toolUseID), &r)
	if err != nil || !found {
		return nil, err
	}
	e := ledgerEntry(toolUseID, &r)
	return &e, nil
}

func (d *domainTxn) PutLedgerEntry(sid string, c *core.LedgerEntry) error {
	return put(d.t, ledgerEntryKey(sid, c.ToolUseID), ledgerEntryRecord(c))
}

func (d *domainTxn) Request(sid, requestID string) (*core.RequestRecord, error) {
	var r storagev1.RequestRecord
	found, err := get(d.t, d.rec, sid, requestKey(sid, requestID), &r)
	if err != nil || !found {
		return nil, err
	}
	rr := requestFromRecord(requestID, &r)
	return &rr, nil
}

func (d *domainTxn) PutRequest(sid string, r *core.RequestRecord) error {
	return put(d.t, requestKey(sid, r.RequestID), requestRecord(r))
}

func (d *domainTxn) PutMessages(sid string, first uint64, msgs []core.Message) error {
	for i, m := range msgs {
		if err := put(d.t, messageKey(sid, first+uint64(i)), &storagev1.Message{Role: m.Role, ContentJson: m.ContentJSON}); err != nil {
			return err
		}
	}
	return nil
}

func (d *domainTxn) PutRevision(sid string, r *core.RevisionRecord) error {
	return put(d.t, revisionKey(sid, r.Revision), revisionRecord(r))
}

func (d *domainTxn) Revision(sid string, _ *core.HeadRecord, rev uint64) (*core.RevisionRecord, error) {
	r, err := revision(d.t, sid, d.rec, rev)
	if err != nil {
		return nil, err
	}
	rr := revisionFromRecord(r)
	return &rr, nil
}

func (d *domainTxn) EachLedgerEntry(sid string, fn func(c *core.LedgerEntry) (bool, error)) error {
	err := eachLedgerEntry(d.t, sid, d.rec, func(id string, call *storagev1.LedgerEntryRecord) error {
		e := ledgerEntry(id, call)
		more, err := fn(&e)
		if err == nil && !more {
			return errStop
		}
		return err
	})
	if err == errStop {
		return nil
	}
	return err
}

// errStop ends an iteration early.
var errStop = errors.New("stop")

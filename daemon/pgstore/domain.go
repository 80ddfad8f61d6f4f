package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// domainTxn is a query seen as a core.Txn, for the protocol's write rules.
// It serves one session: Head locks the session's row (FOR UPDATE), and the
// head it read, live or tombstone, answers DeletedEpoch, Create and the
// revision and epoch of a corruption error.
type domainTxn struct {
	ctx context.Context
	q   *query
	// requestID, when set, is the request id the operation checks first:
	// Head reads its row too, under the lock and in the same round trip,
	// and Request answers from that read.
	requestID string
	request   *rowRead
	// calls are the call rows read ahead with the head (pipeline.go), each
	// answering Call once.
	calls map[string]*rowRead
	rec   *sessionRec // the live head as read, or nil
	tomb  *sessionRec
}

var _ core.Txn = (*domainTxn)(nil)

func (d *domainTxn) Head(sid string) (*core.HeadRecord, error) {
	d.request = nil
	var live, tomb *sessionRec
	var err error
	if a := d.q.ahead(sid, d.requestID); a != nil {
		d.request, d.calls = a.request, a.calls
		live, tomb, err = a.head.sessionHead(sid)
	} else {
		var with []*rowRead
		if d.requestID != "" {
			d.request = &rowRead{k: requestKey(sid, d.requestID)}
			with = append(with, d.request)
		}
		live, tomb, err = d.q.head(d.ctx, sid, true, with...)
	}
	if err != nil || live == nil {
		d.rec, d.tomb = nil, tomb
		return nil, err
	}
	d.rec, d.tomb = live, nil
	segs := live.Segments
	if live.SegmentsRevision != live.Revision || segmentsCount(segs) != live.MessageCount {
		// Not this revision's: read them from it.
		r, err := d.q.revision(d.ctx, sid, live, 0)
		if errors.Is(err, core.ErrRevisionNotFound) {
			return nil, corrupt(live, sid, fmt.Errorf("its latest revision %d is missing", live.Revision))
		}
		if err != nil {
			return nil, err
		}
		segs = r.Segments
	}
	h := headOf(live, segmentsOf(segs))
	return &h, nil
}

func segmentsCount(segs []segment) uint64 {
	var n uint64
	for _, sg := range segs {
		n += sg.Count
	}
	return n
}

// DeletedEpoch is the tombstone's epoch: tombstones here never expire.
func (d *domainTxn) DeletedEpoch(string) (uint64, error) {
	if d.tomb == nil {
		return 0, nil
	}
	return d.tomb.Epoch, nil
}

// Create inserts the session's row first when it has none, so that a
// concurrent creator, on this daemon or another, waits on it and fails with
// a unique violation, and runs again to find it (runOne). Over a tombstone
// the row is locked already.
func (d *domainTxn) Create(sid string, h *core.HeadRecord) error {
	d.rec = headRecOf(h)
	return d.q.putHead(d.ctx, sid, d.rec, d.tomb == nil)
}

func (d *domainTxn) PutHead(sid string, h *core.HeadRecord) error {
	d.rec = headRecOf(h)
	return d.q.putHead(d.ctx, sid, d.rec, false)
}

func (d *domainTxn) LedgerEntry(sid, toolUseID string) (*core.LedgerEntry, error) {
	var c ledgerEntryRec
	var found bool
	var err error
	if r := d.calls[toolUseID]; r != nil {
		delete(d.calls, toolUseID) // later reads see this request's writes
		found, err = r.decode(d.rec, sid, &c)
	} else {
		found, err = d.q.ledgerEntry(d.ctx, sid, d.rec, toolUseID, &c)
	}
	if err != nil || !found {
		return nil, err
	}
	e := ledgerEntry(toolUseID, &c)
	return &e, nil
}

func (d *domainTxn) PutLedgerEntry(sid string, c *core.LedgerEntry) error {
	return d.q.putLedgerEntry(d.ctx, sid, c.ToolUseID, ledgerEntryRecOf(c))
}

func (d *domainTxn) Request(sid, requestID string) (*core.RequestRecord, error) {
	read := d.request
	if read == nil || requestID != d.requestID {
		read = &rowRead{k: requestKey(sid, requestID)}
		if err := d.q.readRows(d.ctx, read); err != nil {
			return nil, err
		}
	}
	var r requestRec
	found, err := read.decode(d.rec, sid, &r)
	if err != nil || !found {
		return nil, err
	}
	return &core.RequestRecord{RequestID: requestID, Fingerprint: r.Fingerprint, Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch, AlreadyBegun: r.AlreadyBegun}, nil
}

func (d *domainTxn) PutRequest(sid string, r *core.RequestRecord) error {
	d.request = nil // read afresh from now on
	return d.q.put(d.ctx, requestKey(sid, r.RequestID), &requestRec{
		Fingerprint: r.Fingerprint, Revision: r.Revision, MessageCount: r.MessageCount, Epoch: r.Epoch, AlreadyBegun: r.AlreadyBegun,
	}, false)
}

func (d *domainTxn) PutMessages(sid string, first uint64, msgs []core.Message) error {
	return d.q.putMessages(d.ctx, sid, first, msgs)
}

func (d *domainTxn) PutRevision(sid string, r *core.RevisionRecord) error {
	return d.q.put(d.ctx, revisionKey(sid, r.Revision), revisionRecOf(r), false)
}

func (d *domainTxn) Revision(sid string, _ *core.HeadRecord, rev uint64) (*core.RevisionRecord, error) {
	r, err := d.q.revision(d.ctx, sid, d.rec, rev)
	if err != nil {
		return nil, err
	}
	rr := revisionOf(r)
	return &rr, nil
}

func (d *domainTxn) EachLedgerEntry(sid string, fn func(c *core.LedgerEntry) (bool, error)) error {
	return d.q.eachLedgerEntry(d.ctx, sid, d.rec, "", func(id string, call *ledgerEntryRec) (bool, error) {
		e := ledgerEntry(id, call)
		return fn(&e)
	})
}

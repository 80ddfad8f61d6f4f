package rpc

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

// Page tokens are opaque to clients (AIP-158): the base64url encoding of a
// version byte, a kind byte and the kind's fields. They are not signed: a
// forged token can only ask for data the caller may read anyway.
const (
	pageTokenVersion = 1

	tokenMessages      byte = 1 // ListMessages: session, revision, next index
	tokenSessions      byte = 2 // ListSessions: label filter digest, last id
	tokenResolved      byte = 3 // Reconcile: session, revision, next index
	tokenEffects       byte = 4 // ListEffects: session, last tool use id
	tokenThreads       byte = 5 // ListThreads: last thread id
	tokenByUpdate      byte = 6 // ListSessions by last update: filter digest, last update time, last id
	tokenThreadEffects byte = 7 // ListThreadEffects: thread, last namespace, last tool use id

	maxPageTokenLen = 1024
)

// pageToken is the decoded form of a next_page_token.
type pageToken struct {
	kind byte
	// id is the session read for tokenMessages, and the last session
	// returned for tokenSessions.
	id       string
	revision uint64 // tokenMessages
	next     uint64 // tokenMessages: index of the next message
	filter   uint64 // tokenSessions, tokenByUpdate: filterDigest of the filter
	updateNs int64  // tokenByUpdate: the last session's update time, Unix nanoseconds
	after    string // tokenEffects, tokenThreadEffects: the last tool use id returned; tokenThreads: the last thread id
	ns       string // tokenThreadEffects: the last namespace returned
}

func messagesToken(sessionID string, revision, next uint64) pageToken {
	return pageToken{kind: tokenMessages, id: sessionID, revision: revision, next: next}
}

func sessionsToken(filter sessionsQuery, lastID string) pageToken {
	return pageToken{kind: tokenSessions, id: lastID, filter: filter.digest()}
}

// sessionsQuery is the part of a ListSessions request a page token is bound
// to: min_idle as given, not the cutoff time it makes on each page.
type sessionsQuery struct {
	labels     map[string]string
	status     core.SessionStatus
	hasPending bool
	minIdle    time.Duration
}

// digest identifies a query, so that a token is used only with the filters
// it was made for. A query of labels alone digests as the label filter did
// before the other filters existed, so older tokens stay valid.
func (q sessionsQuery) digest() uint64 {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(q.labels)) {
		h.Write(binary.AppendUvarint(nil, uint64(len(k))))
		h.Write([]byte(k))
		h.Write(binary.AppendUvarint(nil, uint64(len(q.labels[k]))))
		h.Write([]byte(q.labels[k]))
	}
	if q.status != core.StatusAny || q.hasPending || q.minIdle != 0 {
		b := []byte{0xff} // no label key is empty, so no label digest starts like this
		b = binary.AppendUvarint(b, uint64(q.status))
		if q.hasPending {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendVarint(b, int64(q.minIdle))
		h.Write(b)
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func effectsToken(sessionID, lastToolUseID string) pageToken {
	return pageToken{kind: tokenEffects, id: sessionID, after: lastToolUseID}
}

func threadsToken(lastThreadID string) pageToken {
	return pageToken{kind: tokenThreads, after: lastThreadID}
}

// decodeThreadsToken decodes a ListThreads token and returns the last
// thread id it had returned.
func decodeThreadsToken(s string) (after string, err error) {
	t, err := decodePageToken(s)
	if err != nil {
		return "", err
	}
	if t.kind != tokenThreads {
		return "", fmt.Errorf("%w: not a ListThreads token", core.ErrInvalidPageToken)
	}
	return t.after, nil
}

// decodeEffectsToken decodes a ListEffects token, checks that it was made
// for sessionID, and returns the last tool use id it had returned.
func decodeEffectsToken(s, sessionID string) (after string, err error) {
	t, err := decodePageToken(s)
	if err != nil {
		return "", err
	}
	switch {
	case t.kind != tokenEffects:
		return "", fmt.Errorf("%w: not a ListEffects token", core.ErrInvalidPageToken)
	case t.id != sessionID:
		return "", fmt.Errorf("%w: made for another session", core.ErrInvalidPageToken)
	}
	return t.after, nil
}

// encode returns the token's opaque text.
func (t pageToken) encode() string {
	b := []byte{pageTokenVersion, t.kind}
	switch t.kind {
	case tokenMessages, tokenResolved:
		b = binary.AppendUvarint(b, uint64(len(t.id)))
		b = append(b, t.id...)
		b = binary.AppendUvarint(b, t.revision)
		b = binary.AppendUvarint(b, t.next)
	case tokenSessions:
		b = binary.BigEndian.AppendUint64(b, t.filter)
		b = binary.AppendUvarint(b, uint64(len(t.id)))
		b = append(b, t.id...)
	case tokenEffects:
		b = binary.AppendUvarint(b, uint64(len(t.id)))
		b = append(b, t.id...)
		b = binary.AppendUvarint(b, uint64(len(t.after)))
		b = append(b, t.after...)
	case tokenThreads:
		b = binary.AppendUvarint(b, uint64(len(t.after)))
		b = append(b, t.after...)
	case tokenThreadEffects:
		for _, s := range []string{t.id, t.ns, t.after} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	case tokenByUpdate:
		b = binary.BigEndian.AppendUint64(b, t.filter)
		b = binary.AppendVarint(b, t.updateNs)
		b = binary.AppendUvarint(b, uint64(len(t.id)))
		b = append(b, t.id...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken parses a token made by encode. Anything else is an error
// wrapping ErrInvalidPageToken.
func decodePageToken(s string) (pageToken, error) {
	bad := func(why string) (pageToken, error) {
		return pageToken{}, fmt.Errorf("%w: %s", core.ErrInvalidPageToken, why)
	}
	if len(s) > maxPageTokenLen {
		return bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not made by this service")
	}
	d := tokenDecoder{b: b}
	if d.byte() != pageTokenVersion {
		return bad("unknown version")
	}
	t := pageToken{kind: d.byte()}
	switch t.kind {
	case tokenMessages, tokenResolved:
		t.id = d.string()
		t.revision = d.uvarint()
		t.next = d.uvarint()
	case tokenSessions:
		t.filter = d.uint64()
		t.id = d.string()
	case tokenEffects:
		t.id = d.string()
		t.after = d.string()
	case tokenThreads:
		t.after = d.string()
	case tokenThreadEffects:
		t.id = d.string()
		t.ns = d.string()
		t.after = d.string()
	case tokenByUpdate:
		t.filter = d.uint64()
		t.updateNs = d.varint()
		t.id = d.string()
	default:
		return bad("unknown kind")
	}
	if d.err || len(d.b) != 0 {
		return bad("malformed")
	}
	return t, nil
}

// tokenDecoder reads fields from b, setting err instead of panicking when b
// runs short.
type tokenDecoder struct {
	b   []byte
	err bool
}

func (d *tokenDecoder) byte() byte {
	if len(d.b) < 1 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *tokenDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *tokenDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *tokenDecoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.err = true
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *tokenDecoder) string() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decodeMessagesToken decodes a ListMessages token and checks that it was
// made for sessionID and, unless revision is 0, for that revision.
func decodeMessagesToken(s, sessionID string, revision uint64) (pageToken, error) {
	t, err := decodePageToken(s)
	if err != nil {
		return pageToken{}, err
	}
	switch {
	case t.kind != tokenMessages:
		return pageToken{}, fmt.Errorf("%w: not a ListMessages token", core.ErrInvalidPageToken)
	case t.id != sessionID:
		return pageToken{}, fmt.Errorf("%w: made for another session", core.ErrInvalidPageToken)
	case revision != 0 && t.revision != revision:
		return pageToken{}, fmt.Errorf("%w: made for revision %d, not %d", core.ErrInvalidPageToken, t.revision, revision)
	}
	return t, nil
}

func resolutionsToken(sessionID string, revision, next uint64) pageToken {
	return pageToken{kind: tokenResolved, id: sessionID, revision: revision, next: next}
}

// decodeResolutionsToken decodes a Reconcile token and checks that it was
// made for sessionID at its latest revision.
func decodeResolutionsToken(s, sessionID string, latest uint64) (next uint64, err error) {
	t, err := decodePageToken(s)
	if err != nil {
		return 0, err
	}
	switch {
	case t.kind != tokenResolved:
		return 0, fmt.Errorf("%w: not a Reconcile token", core.ErrInvalidPageToken)
	case t.id != sessionID:
		return 0, fmt.Errorf("%w: made for another session", core.ErrInvalidPageToken)
	case t.revision != latest:
		return 0, fmt.Errorf("%w: made for revision %d, but the session is at revision %d now; reconcile again from the start", core.ErrInvalidPageToken, t.revision, latest)
	}
	return t.next, nil
}

func byUpdateToken(filter sessionsQuery, last core.SessionSummary) pageToken {
	var ns int64 // a damaged head's unknown time sorts as 0
	if !last.UpdateTime.IsZero() {
		ns = last.UpdateTime.UnixNano()
	}
	return pageToken{kind: tokenByUpdate, filter: filter.digest(), updateNs: ns, id: last.SessionID}
}

// decodeByUpdateToken decodes a ListSessions token of the order by last
// update, checks that it was made for the query, and returns the position
// after which the next page starts.
func decodeByUpdateToken(s string, q sessionsQuery) (core.UpdateCursor, error) {
	t, err := decodePageToken(s)
	if err != nil {
		return core.UpdateCursor{}, err
	}
	switch {
	case t.kind == tokenSessions:
		return core.UpdateCursor{}, fmt.Errorf("%w: made for order_by %q, not %q", core.ErrInvalidPageToken, orderBySessionID, orderByUpdateDesc)
	case t.kind != tokenByUpdate:
		return core.UpdateCursor{}, fmt.Errorf("%w: not a ListSessions token", core.ErrInvalidPageToken)
	case t.filter != q.digest():
		return core.UpdateCursor{}, fmt.Errorf("%w: made for other filters (label_filter, status_filter, has_pending_tool_uses, min_idle)", core.ErrInvalidPageToken)
	}
	return core.UpdateCursor{UpdateTime: time.Unix(0, t.updateNs), SessionID: t.id}, nil
}

// decodeSessionsToken decodes a ListSessions token, checks that it was made
// for the query, and returns the last session id it had returned.
func decodeSessionsToken(s string, q sessionsQuery) (after string, err error) {
	t, err := decodePageToken(s)
	if err != nil {
		return "", err
	}
	switch {
	case t.kind == tokenByUpdate:
		return "", fmt.Errorf("%w: made for order_by %q, not %q", core.ErrInvalidPageToken, orderByUpdateDesc, orderBySessionID)
	case t.kind != tokenSessions:
		return "", fmt.Errorf("%w: not a ListSessions token", core.ErrInvalidPageToken)
	case t.filter != q.digest():
		return "", fmt.Errorf("%w: made for other filters (label_filter, status_filter, has_pending_tool_uses, min_idle)", core.ErrInvalidPageToken)
	}
	return t.id, nil
}

package rpc

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"
)

func TestPageTokenRoundTrip(t *testing.T) {
	for _, tok := range []pageToken{
		messagesToken("s1", 1, 0),
		effectsToken("s1", "toolu_01"),
		effectsToken(strings.Repeat("s", 128), strings.Repeat("t", 512)),
		messagesToken("a.b:c-d_e", 18446744073709551615, 18446744073709551615),
		messagesToken(strings.Repeat("s", 128), 7, 300),
		sessionsToken(sessionsQuery{}, ""),
		sessionsToken(sessionsQuery{labels: map[string]string{"team": "a", "env": "prod"}}, "s-99"),
	} {
		s := tok.encode()
		if strings.ContainsAny(s, "+/=") {
			t.Errorf("token %q is not unpadded base64url", s)
		}
		got, err := decodePageToken(s)
		if err != nil {
			t.Fatalf("decode(%q): %v", s, err)
		}
		if got != tok {
			t.Errorf("decode(encode(%+v)) = %+v", tok, got)
		}
	}
}

func TestDecodePageTokenInvalid(t *testing.T) {
	valid := messagesToken("s1", 3, 10).encode()
	raw, _ := base64.RawURLEncoding.DecodeString(valid)
	enc := base64.RawURLEncoding.EncodeToString
	tests := map[string]string{
		"garbage":        "not a token!",
		"padded":         valid + "=",
		"empty bytes":    "",
		"version":        enc(append([]byte{9}, raw[1:]...)),
		"kind":           enc([]byte{pageTokenVersion, 9}),
		"truncated":      enc(raw[:len(raw)-1]),
		"trailing":       enc(append(raw, 0)),
		"length overrun": enc([]byte{pageTokenVersion, tokenMessages, 200, 's'}),
		"too long":       strings.Repeat("A", maxPageTokenLen+1),
		"short sessions": enc([]byte{pageTokenVersion, tokenSessions, 1, 2, 3}),
	}
	for name, s := range tests {
		if _, err := decodePageToken(s); !errors.Is(err, core.ErrInvalidPageToken) {
			t.Errorf("%s: decode(%q) = %v, want ErrInvalidPageToken", name, s, err)
		}
	}
}

func TestDecodeMessagesToken(t *testing.T) {
	tok := messagesToken("s1", 3, 10).encode()
	tests := []struct {
		name     string
		token    string
		session  string
		revision uint64
		ok       bool
	}{
		{"same revision", tok, "s1", 3, true},
		{"latest", tok, "s1", 0, true},
		{"other session", tok, "s2", 0, false},
		{"other revision", tok, "s1", 4, false},
		{"sessions token", sessionsToken(sessionsQuery{}, "s1").encode(), "s1", 0, false},
		{"garbage", "%%%", "s1", 0, false},
	}
	for _, tt := range tests {
		got, err := decodeMessagesToken(tt.token, tt.session, tt.revision)
		if tt.ok {
			if err != nil || got.revision != 3 || got.next != 10 {
				t.Errorf("%s: got %+v, %v", tt.name, got, err)
			}
		} else if !errors.Is(err, core.ErrInvalidPageToken) {
			t.Errorf("%s: err = %v, want ErrInvalidPageToken", tt.name, err)
		}
	}
}

func TestDecodeSessionsToken(t *testing.T) {
	filter := map[string]string{"team": "a", "env": "prod"}
	tok := sessionsToken(sessionsQuery{labels: filter}, "s7").encode()
	tests := []struct {
		name   string
		token  string
		filter map[string]string
		ok     bool
	}{
		{"same filter", tok, map[string]string{"env": "prod", "team": "a"}, true},
		{"no filter", tok, nil, false},
		{"other value", tok, map[string]string{"team": "b", "env": "prod"}, false},
		{"split differently", sessionsToken(sessionsQuery{labels: map[string]string{"a": "bc"}}, "s7").encode(), map[string]string{"ab": "c"}, false},
		{"messages token", messagesToken("s7", 1, 1).encode(), filter, false},
		{"effects token", effectsToken("s7", "t1").encode(), filter, false},
	}
	for _, tt := range tests {
		after, err := decodeSessionsToken(tt.token, sessionsQuery{labels: tt.filter})
		if tt.ok {
			if err != nil || after != "s7" {
				t.Errorf("%s: got %q, %v", tt.name, after, err)
			}
		} else if !errors.Is(err, core.ErrInvalidPageToken) {
			t.Errorf("%s: err = %v, want ErrInvalidPageToken", tt.name, err)
		}
	}
	if got := sessionsToken(sessionsQuery{}, "").encode(); got == sessionsToken(sessionsQuery{labels: map[string]string{"": ""}}, "").encode() {
		t.Errorf("empty filter and {\"\":\"\"} share a digest")
	}
}

// TestSessionsTokenFilters checks that a ListSessions token is bound to
// every filter, and that a labels-only query digests as before the other
// filters existed (a token made then stays valid).
func TestSessionsTokenFilters(t *testing.T) {
	labels := map[string]string{"team": "a"}
	queries := []sessionsQuery{
		{labels: labels},
		{labels: labels, status: core.StatusCompleted},
		{labels: labels, status: core.StatusFailed},
		{labels: labels, hasPending: true},
		{labels: labels, minIdle: time.Hour},
		{labels: labels, minIdle: 2 * time.Hour},
	}
	for i, made := range queries {
		tok := sessionsToken(made, "s1").encode()
		for j, used := range queries {
			_, err := decodeSessionsToken(tok, used)
			if (err == nil) != (i == j) {
				t.Errorf("token made for %+v, used with %+v: err = %v", made, used, err)
			}
		}
	}
	// The digest of a labels-only query, as the label filter digest was
	// computed before status, pending and idle filters.
	h := sha256.New()
	h.Write([]byte{4})
	h.Write([]byte("team"))
	h.Write([]byte{1})
	h.Write([]byte("a"))
	if got, want := (sessionsQuery{labels: labels}).digest(), binary.BigEndian.Uint64(h.Sum(nil)); got != want {
		t.Errorf("labels-only digest = %x, want the earlier label digest %x", got, want)
	}
}

func TestDecodeEffectsToken(t *testing.T) {
	tok := effectsToken("s1", "tool:7").encode()
	if after, err := decodeEffectsToken(tok, "s1"); err != nil || after != "tool:7" {
		t.Errorf("same session: got %q, %v", after, err)
	}
	for name, tt := range map[string]struct{ token, session string }{
		"other session":  {tok, "s2"},
		"messages token": {messagesToken("s1", 1, 1).encode(), "s1"},
		"sessions token": {sessionsToken(sessionsQuery{}, "s1").encode(), "s1"},
		"garbage":        {"!!", "s1"},
	} {
		if _, err := decodeEffectsToken(tt.token, tt.session); !errors.Is(err, core.ErrInvalidPageToken) {
			t.Errorf("%s: err = %v, want ErrInvalidPageToken", name, err)
		}
	}
}

// FuzzDecodePageToken checks that decoding never panics and that a decoded
// token encodes to a token that decodes to the same value.
func FuzzDecodePageToken(f *testing.F) {
	f.Add(messagesToken("s1", 1, 0).encode())
	f.Add(messagesToken("session:a.b", 42, 1000).encode())
	f.Add(sessionsToken(sessionsQuery{labels: map[string]string{"team": "a"}}, "s9").encode())
	f.Add(effectsToken("s1", "t1").encode())
	f.Add(sessionsToken(sessionsQuery{status: core.StatusCompleted, hasPending: true, minIdle: time.Minute}, "s2").encode())
	f.Add("")
	f.Add("AQ")
	f.Add("////")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodePageToken(s)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidPageToken) {
				t.Fatalf("decode(%q) = %v, not ErrInvalidPageToken", s, err)
			}
			return
		}
		again, err := decodePageToken(tok.encode())
		if err != nil || again != tok {
			t.Fatalf("decode(%q) = %+v, re-encoded decodes to %+v, %v", s, tok, again, err)
		}
	})
}

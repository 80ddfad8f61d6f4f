package daemon

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadPeerCred reads this process's own credentials across a Unix
// socket: uid, gid, pid and the supplementary groups (SO_PEERGROUPS).
func TestReadPeerCred(t *testing.T) {
	dir, err := os.MkdirTemp("", "pc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	pc, err := readPeerCred(server.(*net.UnixConn))
	if err != nil {
		t.Fatal(err)
	}
	if pc.UID != uint32(os.Getuid()) || pc.GID != uint32(os.Getgid()) || pc.PID != uint32(os.Getpid()) {
		t.Errorf("peer cred %+v, want uid %d gid %d pid %d", pc, os.Getuid(), os.Getgid(), os.Getpid())
	}
	groups, _ := os.Getgroups()
	var want []uint32
	for _, g := range groups {
		want = append(want, uint32(g))
	}
	got := slices.Clone(pc.Groups)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("peer groups %v, want this process's %v", got, want)
	}
}

func TestAllowListAdmits(t *testing.T) {
	caller := PeerCred{UID: 1000, GID: 1000, Groups: []uint32{27, 998}}
	tests := []struct {
		name string
		list allowList
		want bool
	}{
		{"uid", allowList{uids: []uint32{1000}}, true},
		{"primary gid", allowList{gids: []uint32{1000}}, true},
		{"supplementary gid", allowList{gids: []uint32{998}}, true},
		{"uid listed elsewhere, gid matches", allowList{uids: []uint32{0}, gids: []uint32{27}}, true},
		{"neither", allowList{uids: []uint32{0}, gids: []uint32{0, 5}}, false},
		{"uid is not a gid", allowList{gids: []uint32{1001}, uids: []uint32{27}}, false},
	}
	for _, tt := range tests {
		if got := tt.list.admits(caller); got != tt.want {
			t.Errorf("%s: admits = %v, want %v", tt.name, got, tt.want)
		}
	}
}

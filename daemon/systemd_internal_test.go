package daemon

import (
	"errors"
	"net"
	"testing"
)

func TestSameAddr(t *testing.T) {
	tests := []struct {
		listen string
		addr   net.Addr
		ok     bool
	}{
		{"unix:/run/savepoint/savepoint.sock", &net.UnixAddr{Name: "/run/savepoint/savepoint.sock", Net: "unix"}, true},
		{"unix:///run/savepoint/savepoint.sock", &net.UnixAddr{Name: "/run/savepoint/savepoint.sock", Net: "unix"}, true},
		{"unix:/run/savepoint//savepoint.sock", &net.UnixAddr{Name: "/run/savepoint/savepoint.sock", Net: "unix"}, true},
		{"unix:/run/other.sock", &net.UnixAddr{Name: "/run/savepoint/savepoint.sock", Net: "unix"}, false},
		{"127.0.0.1:7420", &net.UnixAddr{Name: "/run/savepoint/savepoint.sock", Net: "unix"}, false},
		{"127.0.0.1:7420", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}, true},
		{"[::1]:7420", &net.TCPAddr{IP: net.IPv6loopback, Port: 7420}, true},
		{"127.0.0.1:7421", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}, false},
		// ListenStream=7420 binds every address: not the loopback --listen names.
		{"127.0.0.1:7420", &net.TCPAddr{IP: net.IPv6unspecified, Port: 7420}, false},
		{"unix:/run/savepoint/savepoint.sock", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}, false},
	}
	for _, tt := range tests {
		err := sameAddr(tt.listen, tt.addr)
		if (err == nil) != tt.ok {
			t.Errorf("sameAddr(%q, %v) = %v, want ok=%v", tt.listen, tt.addr, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("sameAddr(%q, %v) = %v, not ErrConfig", tt.listen, tt.addr, err)
		}
	}
}

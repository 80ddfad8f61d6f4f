package client

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// EnvAddr is the environment variable that overrides the default address.
const EnvAddr = "SAVEPOINT_ADDR"

// DefaultAddr returns the address Dial uses when given "": $SAVEPOINT_ADDR
// when set, else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when
// XDG_RUNTIME_DIR is set, else unix:/run/savepoint/savepoint.sock. savepointd
// resolves its default --listen address the same way.
func DefaultAddr() string { return defaultAddr(os.Getenv) }

func defaultAddr(getenv func(string) string) string {
	if a := getenv(EnvAddr); a != "" {
		return a
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return "unix:" + filepath.Join(d, "savepoint", "savepoint.sock")
	}
	return "unix:/run/savepoint/savepoint.sock"
}

// endpoint is a parsed address: a network for net.Dial and its address.
type endpoint struct {
	network string // "unix" or "tcp"
	address string // a socket path, or HOST:PORT
}

// parseAddr parses "unix:PATH" (also "unix://PATH" with an absolute PATH) or
// "HOST:PORT".
func parseAddr(addr string) (endpoint, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if rest, ok := strings.CutPrefix(path, "//"); ok {
			if !strings.HasPrefix(rest, "/") {
				return endpoint{}, fmt.Errorf("savepoint: address %q: unix://PATH needs an absolute PATH", addr)
			}
			path = rest
		}
		if path == "" {
			return endpoint{}, fmt.Errorf("savepoint: address %q: empty socket path", addr)
		}
		return endpoint{network: "unix", address: path}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || strings.Contains(host, "/") {
		return endpoint{}, fmt.Errorf("savepoint: address %q is neither unix:PATH nor HOST:PORT", addr)
	}
	return endpoint{network: "tcp", address: addr}, nil
}

// ValidateAddr returns nil when addr is an address Dial accepts
// ("unix:PATH" or "HOST:PORT"), else an error saying why not; "" is valid
// (DefaultAddr).
func ValidateAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, err := parseAddr(addr)
	return err
}

// Package addr is the one definition of savepointd's addresses, shared by the
// daemon and the Go client: the default every side resolves, and the syntax
// "unix:PATH" or "HOST:PORT".
package addr

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// Env is the environment variable that overrides the default address.
const Env = "SAVEPOINT_ADDR"

// Default returns the address used when none is given, reading the
// environment through getenv: $SAVEPOINT_ADDR when set, else
// unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when XDG_RUNTIME_DIR is set,
// else unix:STATE/savepoint.sock in the per-user StateDir (a directory the
// user owns, mode 0700, never a shared path another user could take
// first), else, with no home directory either,
// unix:/run/savepoint/savepoint.sock.
func Default(getenv func(string) string) string {
	if a := getenv(Env); a != "" {
		return a
	}
	if dir := getenv("XDG_RUNTIME_DIR"); dir != "" {
		return "unix:" + filepath.Join(dir, "savepoint", "savepoint.sock")
	}
	if dir := StateDir(getenv); dir != "" {
		return "unix:" + filepath.Join(dir, "savepoint.sock")
	}
	return "unix:/run/savepoint/savepoint.sock"
}

// StateDir returns the per-user directory of a daemon the clients start on
// demand (its data, its log and, when XDG_RUNTIME_DIR is unset, its
// socket): $XDG_STATE_HOME/savepoint when XDG_STATE_HOME is an absolute
// path (the XDG base directory specification ignores a relative one), else
// $HOME/.local/state/savepoint when HOME is set, else "".
func StateDir(getenv func(string) string) string {
	if dir := getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "savepoint")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "savepoint")
	}
	return ""
}

// System is the address of the system's daemon, the socket
// contrib/systemd's savepointd.socket creates.
const System = "unix:/run/savepoint/savepoint.sock"

// Parse splits an address into a network and an address for net.Listen or
// net.Dial: "unix:PATH" (or gRPC's "unix:///PATH") gives ("unix", PATH), and
// "HOST:PORT" gives ("tcp", "HOST:PORT"). Anything else is an error that
// quotes the address and says what is wrong.
func Parse(addr string) (network, address string, err error) {
	if rest, ok := strings.CutPrefix(addr, "unix:"); ok {
		if after, ok := strings.CutPrefix(rest, "//"); ok {
			if !strings.HasPrefix(after, "/") {
				return "", "", fmt.Errorf("address %q: unix:// must be followed by an absolute path", addr)
			}
			rest = after
		}
		if rest == "" {
			return "", "", fmt.Errorf("address %q: the socket path is empty", addr)
		}
		return "unix", rest, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || strings.Contains(host, "/") {
		return "", "", fmt.Errorf("address %q is neither unix:PATH nor HOST:PORT", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", fmt.Errorf("address %q: port %q is not a number in 0-65535", addr, port)
	}
	if host == "" {
		return "", "", fmt.Errorf("address %q: the host is empty; give a loopback address such as 127.0.0.1", addr)
	}
	return "tcp", addr, nil
}

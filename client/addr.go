package client

import (
	"fmt"
	"os"

	"github.com/savepoint-dev/savepoint/internal/addr"
)

// EnvAddr is the environment variable that overrides the default address.
const EnvAddr = addr.Env

// DefaultAddr returns the address Dial uses when given "": $SAVEPOINT_ADDR
// when set, else unix:$XDG_RUNTIME_DIR/savepoint/savepoint.sock when
// XDG_RUNTIME_DIR is set, else unix:$XDG_STATE_HOME/savepoint/savepoint.sock
// (XDG_STATE_HOME defaulting to ~/.local/state), else, with no home either,
// unix:/run/savepoint/savepoint.sock. savepointd resolves its default
// --listen address the same way.
func DefaultAddr() string { return addr.Default(os.Getenv) }

// endpoint is a parsed address: a network for net.Dial and its address.
type endpoint struct {
	network string // "unix" or "tcp"
	address string // a socket path, or HOST:PORT
}

// parseAddr parses "unix:PATH" (also "unix://PATH" with an absolute PATH) or
// "HOST:PORT", the syntax savepointd's --listen takes.
func parseAddr(a string) (endpoint, error) {
	network, address, err := addr.Parse(a)
	if err != nil {
		return endpoint{}, fmt.Errorf("savepoint: %w", err)
	}
	return endpoint{network: network, address: address}, nil
}

// ValidateAddr returns nil when addr is an address Dial accepts
// ("unix:PATH" or "HOST:PORT"), else an error saying why not; "" is valid
// (DefaultAddr).
func ValidateAddr(a string) error {
	if a == "" {
		return nil
	}
	_, err := parseAddr(a)
	return err
}

package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/savepoint-dev/savepoint/client"
)

// Config is what every command needs to reach the daemon.
type Config struct {
	// Addr is the daemon's address, "unix:PATH" or "HOST:PORT"; empty means
	// client.DefaultAddr() ($SAVEPOINT_ADDR, then the runtime directory's
	// socket).
	Addr string
	// Timeout bounds the whole command; zero is invalid.
	Timeout time.Duration
}

// DefaultConfig returns the configuration used when no flag is given.
func DefaultConfig() Config { return Config{Timeout: 30 * time.Second} }

// Validate reports a configuration no command can run with.
func (c Config) Validate() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, not %v", c.Timeout)
	}
	if err := client.ValidateAddr(c.Addr); err != nil {
		return fmt.Errorf("--addr: %s", strings.TrimPrefix(err.Error(), "savepoint: "))
	}
	return nil
}

// register adds the flags every command accepts, before or after its name.
func (c *Config) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "the daemon's address, unix:PATH or HOST:PORT (default: $SAVEPOINT_ADDR, else the runtime directory's socket)")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "give up on the whole command after this long")
}

package addr

import (
	"net"
	"testing"

	"github.com/savepoint-dev/savepoint/internal/addr/addrtest"
)

func TestDefault(t *testing.T) {
	for _, tt := range addrtest.Load(t).Default {
		t.Run(tt.Name, func(t *testing.T) {
			if got := Default(func(k string) string { return tt.Env[k] }); got != tt.Want {
				t.Errorf("Default(%v) = %q, want %q", tt.Env, got, tt.Want)
			}
		})
	}
}

func TestStateDir(t *testing.T) {
	for _, tt := range addrtest.Load(t).State {
		t.Run(tt.Name, func(t *testing.T) {
			if got := StateDir(func(k string) string { return tt.Env[k] }); got != tt.Want {
				t.Errorf("StateDir(%v) = %q, want %q", tt.Env, got, tt.Want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tt := range addrtest.Load(t).Parse {
		t.Run(tt.Input, func(t *testing.T) {
			network, address, err := Parse(tt.Input)
			if !tt.OK {
				if err == nil || err.Error() != tt.Error || network != "" || address != "" {
					t.Errorf("Parse(%q) = %q, %q, %v; want the error %q", tt.Input, network, address, err, tt.Error)
				}
				return
			}
			if err != nil || network != tt.Want.Network || address != tt.Want.Address {
				t.Fatalf("Parse(%q) = %q, %q, %v; want %q, %q", tt.Input, network, address, err, tt.Want.Network, tt.Want.Address)
			}
			if network == "tcp" {
				host, port, err := net.SplitHostPort(address)
				if err != nil || host != tt.Want.Host || port != tt.Want.Port {
					t.Errorf("the address %q splits into %q, %q, %v; want host %q, port %q", address, host, port, err, tt.Want.Host, tt.Want.Port)
				}
			}
		})
	}
}

package daemon

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want string // a fragment of the error; "" for none
	}{
		{"defaults", func(c *Config) {}, ""},
		{"zero config", func(c *Config) { *c = Config{} }, ""},
		{"socket 0660", func(c *Config) { c.SocketMode = 0o660 }, ""},
		{"socket 0666", func(c *Config) { c.SocketMode = 0o666 }, "socket mode"},
		{"socket 0700", func(c *Config) { c.SocketMode = 0o700 }, "socket mode"},
		{"tcp loopback", func(c *Config) { c.Listen = "127.0.0.1:7777" }, ""},
		{"tcp loopback v6", func(c *Config) { c.Listen = "[::1]:7777" }, ""},
		{"tcp localhost", func(c *Config) { c.Listen = "localhost:7777" }, ""},
		{"tcp all interfaces", func(c *Config) { c.Listen = "0.0.0.0:7777" }, "needs mutual TLS"},
		{"tcp remote with mTLS", func(c *Config) {
			c.Listen, c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "0.0.0.0:7777", "c", "k", "ca"
		}, ""},
		{"tcp remote, TLS without client CA", func(c *Config) { c.Listen, c.TLSCertFile, c.TLSKeyFile = "0.0.0.0:7777", "c", "k" }, "go together"},
		{"tcp loopback with mTLS", func(c *Config) {
			c.Listen, c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "127.0.0.1:7777", "c", "k", "ca"
		}, ""},
		{"unix with TLS", func(c *Config) { c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "c", "k", "ca" }, "TLS applies to a TCP listener"},
		{"allow uid on unix", func(c *Config) { c.AllowUIDs, c.AllowGIDs = []uint32{1000}, []uint32{27} }, ""},
		{"allow uid on tcp", func(c *Config) { c.Listen, c.AllowUIDs = "127.0.0.1:7777", []uint32{1000} }, "has no uid or gid"},
		{"metrics loopback", func(c *Config) { c.MetricsAddr = "127.0.0.1:9090" }, ""},
		{"metrics localhost", func(c *Config) { c.MetricsAddr = "localhost:9090" }, ""},
		{"metrics all interfaces", func(c *Config) { c.MetricsAddr = ":9090" }, "not a loopback address"},
		{"metrics remote", func(c *Config) { c.MetricsAddr = "10.0.0.5:9090" }, "--metrics-allow-remote"},
		{"metrics remote allowed", func(c *Config) { c.MetricsAddr, c.MetricsAllowRemote = "0.0.0.0:9090", true }, ""},
		{"metrics allow remote alone", func(c *Config) { c.MetricsAllowRemote = true }, "without --metrics-addr"},
		{"metrics bad port", func(c *Config) { c.MetricsAddr = "127.0.0.1:http" }, "not a number"},
		{"metrics no port", func(c *Config) { c.MetricsAddr = "127.0.0.1" }, "not HOST:PORT"},
		{"log json", func(c *Config) { c.LogFormat = "json" }, ""},
		{"log format bad", func(c *Config) { c.LogFormat = "xml" }, "neither text nor json"},
		{"tcp remote", func(c *Config) { c.Listen = "example.com:7777" }, "needs mutual TLS"},
		{"tcp no host", func(c *Config) { c.Listen = ":7777" }, "host is empty"},
		{"bad listen", func(c *Config) { c.Listen = "savepoint.sock" }, "neither"},
		{"negative size", func(c *Config) { c.MaxStateBytes = -1 }, "max state bytes"},
		{"negative timeout", func(c *Config) { c.ShutdownTimeout = -1 }, "shutdown timeout"},
		{"negative retain completed", func(c *Config) { c.RetainCompleted = -time.Hour }, "retain completed"},
		{"negative retain idle", func(c *Config) { c.RetainIdle = -time.Hour }, "retain idle"},
		{"negative retain revisions", func(c *Config) { c.RetainRevisions = -1 }, "retain revisions"},
		{"negative gc interval", func(c *Config) { c.GCInterval = -time.Second }, "gc interval"},
		{"memory limit at least", func(c *Config) { c.MemoryLimit = 48 << 20 }, ""},
		{"memory limit too low", func(c *Config) { c.MemoryLimit = 48<<20 - 1 }, "memory limit"},
		{"negative retain idle", func(c *Config) { c.RetainIdle = -1 }, "retain idle"},
		{"budget at limit", func(c *Config) { c.ResponseBudgetBytes = 4<<20 - 64<<10 }, ""},
		{"budget over limit", func(c *Config) { c.ResponseBudgetBytes = 4<<20 - 64<<10 + 1 }, "receive limit"},
		{"message and state over limit", func(c *Config) { c.MaxMessageBytes = 3 << 20 }, "max message bytes"},
		{"request too small", func(c *Config) { c.MaxRequestBytes = 1 << 20 }, "max request bytes"},
		{"budget below state", func(c *Config) { c.MaxStateBytes, c.MaxMessageBytes, c.ResponseBudgetBytes = 1<<20, 1<<20, 1<<20 }, "response budget bytes"},
		{"small limits", func(c *Config) {
			c.MaxRequestBytes, c.MaxMessageBytes, c.MaxStateBytes, c.ResponseBudgetBytes = 1<<20, 256<<10, 256<<10, 512<<10
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Listen = "unix:/tmp/sp.sock"
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	got := Config{MaxStateBytes: 5, Listen: "unix:/x"}.withDefaults()
	want := DefaultConfig()
	want.MaxStateBytes, want.Listen = 5, "unix:/x"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("withDefaults() = %+v, want %+v", got, want)
	}
}

package client_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/savepoint-dev/savepoint/client"
	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

// TestMutualTLS drives a daemon that serves TCP with mutual TLS: the client
// connects with its certificate given as options or by the environment, and
// is refused without one.
func TestMutualTLS(t *testing.T) {
	ca := daemontest.NewCA(t, "savepoint-test")
	serverCert, serverKey := ca.Server(t, "savepointd")
	clientCert, clientKey := ca.Client(t, "agent")
	addr := daemontest.FreeTCPAddr(t)
	daemontest.RunInProcess(t, daemon.Config{Listen: addr, TLSCertFile: serverCert, TLSKeyFile: serverKey, TLSClientCAFile: ca.CertFile},
		slog.New(slog.DiscardHandler))
	once := client.WithRetry(client.RetryPolicy{MaxAttempts: 1})
	save := func(c *client.Client, sid string) error {
		_, err := c.Raw().SaveCheckpoint(t.Context(), &savepointv1.SaveCheckpointRequest{SessionId: sid})
		return err
	}

	t.Run("options", func(t *testing.T) {
		c := dial(t, addr, client.WithTLS(client.TLS{CAFile: ca.CertFile, CertFile: clientCert, KeyFile: clientKey}))
		if err := save(c, "by-options"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv(client.EnvTLSCA, ca.CertFile)
		t.Setenv(client.EnvTLSCert, clientCert)
		t.Setenv(client.EnvTLSKey, clientKey)
		c := dial(t, addr)
		if err := save(c, "by-env"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		c := dial(t, addr, once, client.WithTLS(client.TLS{CAFile: ca.CertFile}))
		if err := save(c, "refused"); !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("got %v, want the handshake refused (ErrUnavailable)", err)
		}
	})
	t.Run("plaintext", func(t *testing.T) {
		c := dial(t, addr, once)
		if err := save(c, "refused"); !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
	t.Run("daemon not in the CA", func(t *testing.T) {
		other := daemontest.NewCA(t, "other")
		c := dial(t, addr, once, client.WithTLS(client.TLS{CAFile: other.CertFile, CertFile: clientCert, KeyFile: clientKey}))
		if err := save(c, "refused"); !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
}

func TestTLSOptionErrors(t *testing.T) {
	ca := daemontest.NewCA(t, "ca")
	cert, _ := ca.Client(t, "agent")
	for _, tt := range []struct {
		name, addr string
		opt        client.Option
		says       string
	}{
		{"unix socket", "unix:/tmp/x.sock", client.WithTLS(client.TLS{CAFile: ca.CertFile}), "TLS is for TCP addresses"},
		{"certificate without key", "127.0.0.1:1", client.WithTLS(client.TLS{CertFile: cert}), "go together"},
		{"missing CA", "127.0.0.1:1", client.WithTLS(client.TLS{CAFile: "/nonexistent/ca.pem"}), "TLS CA"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Dial(t.Context(), tt.addr, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Dial: %v, want an error saying %q", err, tt.says)
			}
		})
	}
}

// TestTLSEnvironmentLeavesUnixSockets: the SAVEPOINT_TLS_* variables apply
// to TCP addresses only, so setting them globally keeps local sockets working.
func TestTLSEnvironmentLeavesUnixSockets(t *testing.T) {
	t.Setenv(client.EnvTLSCA, "/nonexistent/ca.pem")
	c := dial(t, startDaemon(t, daemon.Config{}))
	if _, err := c.Raw().ListSessions(t.Context(), &savepointv1.ListSessionsRequest{}); err != nil {
		t.Fatal(err)
	}
}

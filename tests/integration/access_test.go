package integration_test

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/savepoint-dev/savepoint/daemon"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
	"github.com/savepoint-dev/savepoint/tests/daemontest"
)

func dialUnix(t *testing.T, socket string) (sp, healthpb.HealthClient) {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return savepointv1.NewSavepointServiceClient(conn), healthpb.NewHealthClient(conn)
}

// supplementaryGID returns a group of this process that is not its primary
// one, if it has any.
func supplementaryGID() (uint32, bool) {
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if g != os.Getgid() {
			return uint32(g), true
		}
	}
	return 0, false
}

// TestAllowUIDsAndGIDs: the caller (this test process) is admitted by its
// uid, its primary gid or a supplementary gid, and refused PERMISSION_DENIED
// when none is listed; health answers every caller, and the call log names
// the caller's uid, gid and pid.
func TestAllowUIDsAndGIDs(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	other := uint32(4242424)
	type tc struct {
		name       string
		uids, gids []uint32
		admitted   bool
	}
	tests := []tc{
		{"no lists", nil, nil, true},
		{"own uid", []uint32{other, uid}, nil, true},
		{"own gid", nil, []uint32{gid}, true},
		{"other uid", []uint32{other}, nil, false},
		{"other uid and gid", []uint32{other}, []uint32{other}, false},
	}
	if sup, ok := supplementaryGID(); ok {
		tests = append(tests, tc{"supplementary gid", nil, []uint32{sup}, true})
	} else {
		t.Log("this process has no supplementary group: the supplementary gid case is not run")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &daemontest.SyncBuffer{}
			logger, _ := daemon.NewLogger(logs, "json", -8)
			socket := daemontest.SocketPath(t)
			daemontest.RunInProcess(t, daemon.Config{Listen: "unix:" + socket, AllowUIDs: tt.uids, AllowGIDs: tt.gids}, logger)
			c, health := dialUnix(t, socket)

			_, saveErr := c.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s"})
			_, listErr := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{})
			for _, err := range []error{saveErr, listErr} {
				if tt.admitted && err != nil {
					t.Fatalf("admitted caller refused: %v", err)
				}
				if !tt.admitted {
					wantReason(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
					if msg := status.Convert(err).Message(); !strings.Contains(msg, "uid "+strconv.Itoa(int(uid))) {
						t.Errorf("message %q does not name the caller's uid", msg)
					}
				}
			}
			if h, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health: %v, %v; want SERVING for every caller", h, err)
			}
			line := findLog(t, logs.String(), savepointv1.SavepointService_SaveCheckpoint_FullMethodName)
			wantCode := "OK"
			if !tt.admitted {
				wantCode = "PermissionDenied"
				if line["reason"] != "PERMISSION_DENIED" {
					t.Errorf("log reason %v", line["reason"])
				}
			}
			if line["code"] != wantCode || line["peer_uid"] != float64(uid) || line["peer_gid"] != float64(gid) ||
				line["peer_pid"] != float64(os.Getpid()) {
				t.Errorf("log line %v: want code %s, peer_uid %d, peer_gid %d, peer_pid %d", line, wantCode, uid, gid, os.Getpid())
			}
		})
	}
}

func tlsClient(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = savepointv1.NewSavepointServiceClient(conn).ListSessions(ctx, &savepointv1.ListSessionsRequest{})
	return err
}

// TestMutualTLS serves TCP with mutual TLS 1.3 and tries clients with and
// without a good certificate.
func TestMutualTLS(t *testing.T) {
	ca, otherCA := daemontest.NewCA(t, "savepoint-test"), daemontest.NewCA(t, "stranger")
	serverCert, serverKey := ca.Server(t, "savepointd")
	addr := daemontest.FreeTCPAddr(t)
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", -4)
	daemontest.RunInProcess(t, daemon.Config{Listen: addr, TLSCertFile: serverCert, TLSKeyFile: serverKey, TLSClientCAFile: ca.CertFile}, logger)

	roots, err := daemon.LoadCertPool(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pair := func(ca *daemontest.CA, name string) []tls.Certificate {
		cf, kf := ca.Client(t, name)
		c, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	good := pair(ca, "agent-1")
	tests := []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"client certificate from the CA", &tls.Config{RootCAs: roots, Certificates: good}, true},
		{"no client certificate", &tls.Config{RootCAs: roots}, false},
		{"client certificate from another CA", &tls.Config{RootCAs: roots, Certificates: pair(otherCA, "intruder")}, false},
		{"TLS 1.2 only", &tls.Config{RootCAs: roots, Certificates: good, MaxVersion: tls.VersionTLS12}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tlsClient(t, addr, tt.cfg)
			if tt.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.ok && status.Code(err) != codes.Unavailable {
				t.Fatalf("got %v, want the handshake refused (UNAVAILABLE)", err)
			}
		})
	}
	// A plaintext client is refused too.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := savepointv1.NewSavepointServiceClient(conn).ListSessions(ctx, &savepointv1.ListSessionsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want UNAVAILABLE", err)
	}
	line := findLog(t, logs.String(), savepointv1.SavepointService_ListSessions_FullMethodName)
	if cert, _ := line["peer_cert"].(string); !strings.Contains(cert, "CN=agent-1") {
		t.Errorf("log line names peer_cert %q, want the client certificate's subject", cert)
	}
}

func TestRunRefusesInsecureAddresses(t *testing.T) {
	for _, cfg := range []daemon.Config{
		{Listen: "0.0.0.0:0"},
		{Listen: "unix:/tmp/x.sock", MetricsAddr: "0.0.0.0:0"},
	} {
		if err := daemon.Run(ctx, cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Run(%+v) = %v, want a refusal naming loopback", cfg, err)
		}
	}
}

// TestPeerHelper is the client TestAllowOtherUsers runs as another user: it
// calls ListSessions on $SAVEPOINT_PEER_HELPER_SOCKET and prints the
// ErrorInfo reason, or OK.
func TestPeerHelper(t *testing.T) {
	socket := os.Getenv("SAVEPOINT_PEER_HELPER_SOCKET")
	if socket == "" {
		t.Skip("run by TestAllowOtherUsers only")
	}
	c, _ := dialUnix(t, socket)
	_, err := c.ListSessions(ctx, &savepointv1.ListSessionsRequest{})
	if err == nil {
		fmt.Println("RESULT OK")
		return
	}
	_, reason, _ := errInfo(t, err)
	fmt.Println("RESULT", reason, status.Code(err))
}

// TestAllowOtherUsers runs a client as other users and groups (which needs
// root) against allow lists: a supplementary group admits, a uid not listed
// is refused.
func TestAllowOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching a client's uid and groups needs root; TestAllowListAdmits covers the rule")
	}
	// A copy of this test binary that other users may run.
	dir, err := os.MkdirTemp("", "peer")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "helper")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	const user, group, sup = 4201, 4202, 4203
	tests := []struct {
		name        string
		cfg         daemon.Config
		cred        syscall.Credential
		wantOutcome string
	}{
		{"supplementary group listed", daemon.Config{AllowGIDs: []uint32{sup}}, syscall.Credential{Uid: user, Gid: group, Groups: []uint32{sup}}, "OK"},
		{"primary group listed", daemon.Config{AllowGIDs: []uint32{group}}, syscall.Credential{Uid: user, Gid: group, Groups: []uint32{sup}}, "OK"},
		{"uid listed", daemon.Config{AllowUIDs: []uint32{user}}, syscall.Credential{Uid: user, Gid: group, Groups: []uint32{}}, "OK"},
		{"not listed", daemon.Config{AllowUIDs: []uint32{0}, AllowGIDs: []uint32{sup}}, syscall.Credential{Uid: user, Gid: group, Groups: []uint32{}}, "PERMISSION_DENIED PermissionDenied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			socket := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".sock")
			cfg := tt.cfg
			cfg.Listen, cfg.SocketMode = "unix:"+socket, 0o660
			daemontest.RunInProcess(t, cfg, slog.New(slog.DiscardHandler))
			// The socket's group lets the other user connect at all; the
			// allow lists decide the calls.
			if err := os.Chown(socket, -1, int(tt.cred.Gid)); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(helper, "-test.run=^TestPeerHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "SAVEPOINT_PEER_HELPER_SOCKET="+socket)
			cred := tt.cred
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &cred}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "RESULT "+tt.wantOutcome+"\n") {
				t.Fatalf("helper said:\n%s\nwant RESULT %s", out, tt.wantOutcome)
			}
		})
	}
}

// TestBinaryFlags drives the real savepointd with --allow-uid, --log-format
// json and --metrics-addr: the wiring from flags to the server.
func TestBinaryFlags(t *testing.T) {
	metrics := daemontest.FreeTCPAddr(t)
	d := daemontest.Start(t, "--allow-uid", "4242424", "--log-format", "json", "--metrics-addr", metrics) // health stays open: Start waits on it
	_, err := d.Client.SaveCheckpoint(ctx, &savepointv1.SaveCheckpointRequest{SessionId: "s"})
	wantReason(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	fams := daemontest.Scrape(t, metrics)
	if v, ok := daemontest.Value(fams, "grpc_server_handled_total", map[string]string{"grpc_method": "SaveCheckpoint", "grpc_code": "PermissionDenied"}); !ok || v != 1 {
		t.Errorf("denied saves counted %v (present %v), want 1", v, ok)
	}
	if line := findLog(t, d.Stderr(), savepointv1.SavepointService_SaveCheckpoint_FullMethodName); line["reason"] != "PERMISSION_DENIED" {
		t.Errorf("log line %v", line)
	}
}

// TestTLSRotation replaces the certificate, key and client CA files of a
// running daemon: new connections get the new ones, with no restart, and a
// half-written rotation keeps the old ones in service.
func TestTLSRotation(t *testing.T) {
	oldCA, newCA := daemontest.NewCA(t, "old"), daemontest.NewCA(t, "new")
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	install := func(ca *daemontest.CA) {
		c, k := ca.Server(t, "savepointd")
		for src, dst := range map[string]string{c: certFile, k: keyFile, ca.CertFile: caFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(oldCA)
	addr := daemontest.FreeTCPAddr(t)
	logs := &daemontest.SyncBuffer{}
	logger, _ := daemon.NewLogger(logs, "json", 0)
	daemontest.RunInProcess(t, daemon.Config{Listen: addr, TLSCertFile: certFile, TLSKeyFile: keyFile, TLSClientCAFile: caFile}, logger)
	clientOf := func(ca *daemontest.CA) *tls.Config {
		roots, err := daemon.LoadCertPool(ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		cf, kf := ca.Client(t, "agent")
		pair, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}
	}
	oldClient, newClient := clientOf(oldCA), clientOf(newCA)
	if err := tlsClient(t, addr, oldClient); err != nil {
		t.Fatalf("before rotation: %v", err)
	}

	// Half written: a key that does not match the certificate.
	other, _ := os.ReadFile(keyFile)
	install(newCA)
	os.WriteFile(keyFile, other, 0o600)
	time.Sleep(1100 * time.Millisecond)
	if err := tlsClient(t, addr, oldClient); err != nil {
		t.Fatalf("a half-written rotation broke the old certificates: %v", err)
	}
	if !strings.Contains(logs.String(), "do not load") {
		t.Errorf("no warning about the half-written rotation:\n%s", logs)
	}

	install(newCA)
	time.Sleep(1100 * time.Millisecond)
	if err := tlsClient(t, addr, newClient); err != nil {
		t.Fatalf("after rotation, a client of the new CA: %v", err)
	}
	if err := tlsClient(t, addr, oldClient); status.Code(err) != codes.Unavailable {
		t.Fatalf("after rotation, a client of the old CA: %v, want refused", err)
	}
}

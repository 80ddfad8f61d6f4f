package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// isLoopback reports whether host (of a HOST:PORT) is "localhost" or a
// loopback IP address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// useTLS reports whether c configures TLS.
func (c Config) useTLS() bool {
	return c.TLSCertFile != "" || c.TLSKeyFile != "" || c.TLSClientCAFile != ""
}

// validateAccess checks who may reach a listener on network: plaintext TCP
// only on loopback, mutual TLS as a whole, uid and gid lists only where the
// kernel can tell a caller's uid and gid (a Unix socket).
func (c Config) validateAccess(network string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.useTLS() && (c.TLSCertFile == "" || c.TLSKeyFile == "" || c.TLSClientCAFile == "") {
		add("tls: --tls-cert, --tls-key and --tls-client-ca go together (mutual TLS); give all three")
	}
	switch network {
	case "tcp":
		host, _, _ := net.SplitHostPort(c.Listen)
		if !isLoopback(host) && !c.useTLS() {
			add("listen: %q is not a loopback address, and a TCP listener beyond loopback needs mutual TLS: "+
				"give --tls-cert, --tls-key and --tls-client-ca, or use unix:PATH, 127.0.0.1:PORT, [::1]:PORT or localhost:PORT", c.Listen)
		}
		if len(c.AllowUIDs) > 0 || len(c.AllowGIDs) > 0 {
			add("allow-uid, allow-gid: a TCP caller has no uid or gid to check; they apply to a unix:PATH listener (TCP callers are checked by their client certificate)")
		}
	case "unix":
		if c.useTLS() {
			add("tls: TLS applies to a TCP listener; a Unix socket's callers are checked by their peer credentials (--allow-uid, --allow-gid)")
		}
	}
	return errs
}

// serverCredentials returns the transport credentials for cfg's listener:
// mutual TLS 1.3 when cfg sets TLS, otherwise plaintext; on a Unix socket
// every connection's peer credentials are read in either case.
func serverCredentials(cfg Config, logger *slog.Logger) (credentials.TransportCredentials, error) {
	if !cfg.useTLS() {
		return peerCredCreds{insecure.NewCredentials()}, nil
	}
	files := &tlsFiles{cert: cfg.TLSCertFile, key: cfg.TLSKeyFile, ca: cfg.TLSClientCAFile, logger: logger}
	if err := files.load(); err != nil {
		return nil, err
	}
	return peerCredCreds{credentials.NewTLS(&tls.Config{
		MinVersion:         tls.VersionTLS13,
		GetConfigForClient: files.configForClient,
	})}, nil
}

// tlsReloadInterval is how often, at most, the TLS files are checked for a
// change.
const tlsReloadInterval = time.Second

// tlsFiles serves the certificate, key and client CAs from their files and
// loads them again when one changes, so that rotating certificates needs no
// restart. Files that fail to load (a rotation half written) leave the
// previous ones in use, with a warning, until they load.
type tlsFiles struct {
	cert, key, ca string
	logger        *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   string // the files' sizes and modification times when loaded
	conf    *tls.Config
}

// stampOf describes the files' current versions.
func (f *tlsFiles) stampOf() string {
	var b strings.Builder
	for _, p := range []string{f.cert, f.key, f.ca} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			b.WriteString("missing;")
		}
	}
	return b.String()
}

func (f *tlsFiles) load() error {
	stamp := f.stampOf()
	conf, err := ServerTLSConfig(f.cert, f.key, f.ca)
	if err != nil {
		return err
	}
	conf.NextProtos = []string{"h2"} // what gRPC's credentials would add
	f.conf, f.stamp = conf, stamp
	return nil
}

func (f *tlsFiles) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.checked) >= tlsReloadInterval {
		f.checked = now
		if f.stampOf() != f.stamp {
			if err := f.load(); err != nil {
				f.logger.Warn("TLS files changed but do not load; serving the previous ones", "err", err)
			} else {
				f.logger.Info("TLS files reloaded", "tls_cert", f.cert, "tls_client_ca", f.ca)
			}
		}
	}
	return f.conf, nil
}

// ServerTLSConfig returns a TLS 1.3 server configuration that presents the
// PEM certificate and key and requires a client certificate that chains to
// one of the PEM CAs in clientCAFile.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load --tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	pool, err := LoadCertPool(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("tls: --tls-client-ca: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// LoadCertPool returns the PEM certificates in path as a pool; a file with
// none is an error.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(path + " holds no PEM certificate")
	}
	return pool, nil
}

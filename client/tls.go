package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// The environment variables Dial reads for a TCP address when no TLS option
// is given: with any of them set, the connection uses TLS 1.3, verifying the
// daemon against SAVEPOINT_TLS_CA (else the system's roots) and presenting
// the client certificate SAVEPOINT_TLS_CERT with its key SAVEPOINT_TLS_KEY.
const (
	EnvTLSCA   = "SAVEPOINT_TLS_CA"
	EnvTLSCert = "SAVEPOINT_TLS_CERT"
	EnvTLSKey  = "SAVEPOINT_TLS_KEY"
)

// TLS names the PEM files of a TLS connection to savepointd over TCP.
type TLS struct {
	// CAFile holds the CAs the daemon's certificate must chain to; empty
	// means the system's roots.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key, which a
	// daemon listening beyond loopback requires (mutual TLS); both or
	// neither.
	CertFile, KeyFile string
	// ServerName is the name the daemon's certificate must hold; empty means
	// the address's host.
	ServerName string
}

// WithTLS makes Dial connect over TLS 1.3 with the given files. A Unix socket
// address takes no TLS: Dial fails.
func WithTLS(t TLS) Option { return func(c *config) { c.tls = &t } }

// WithTLSConfig makes Dial connect over TLS with cfg as given (MinVersion
// raised to TLS 1.3 when lower). A Unix socket address takes no TLS.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tlsConfig = cfg } }

// tlsFromEnv returns the TLS files named by the environment, or nil.
func tlsFromEnv(getenv func(string) string) *TLS {
	t := TLS{CAFile: getenv(EnvTLSCA), CertFile: getenv(EnvTLSCert), KeyFile: getenv(EnvTLSKey)}
	if t == (TLS{}) {
		return nil
	}
	return &t
}

// config returns the tls.Config for t.
func (t TLS) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("savepoint: TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("savepoint: TLS CA: %s holds no PEM certificate", t.CAFile)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("savepoint: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.CertFile != "" || t.KeyFile != "":
		return nil, errors.New("savepoint: TLS: a client certificate and its key go together (" + EnvTLSCert + ", " + EnvTLSKey + ")")
	}
	return cfg, nil
}

// transportTLS returns the TLS configuration Dial uses for ep, or nil for
// plaintext: the options' first, else the environment's for a TCP address.
func (c *config) transportTLS(ep endpoint, getenv func(string) string) (*tls.Config, error) {
	explicit := c.tlsConfig != nil || c.tls != nil
	if ep.network == "unix" {
		if explicit {
			return nil, errors.New("savepoint: TLS is for TCP addresses; a Unix socket is checked by its permissions and the daemon's --allow-uid and --allow-gid")
		}
		return nil, nil
	}
	if c.tlsConfig != nil {
		cfg := c.tlsConfig.Clone()
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS13)
		return cfg, nil
	}
	t := c.tls
	if t == nil {
		t = tlsFromEnv(getenv)
	}
	if t == nil {
		return nil, nil
	}
	return t.config()
}

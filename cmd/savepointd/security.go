package main

import (
	"flag"
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// addSecurityFlags defines the access control, TLS, encryption, metrics and
// log format flags; name records each flag's environment variable. It
// returns the list flags, which parseConfig marks so that a flag replaces
// the environment's list instead of adding to it.
func addSecurityFlags(fs *flag.FlagSet, cfg *config, name func(flagName, envVar string) string) []*idList {
	uids := &idList{ids: &cfg.AllowUIDs, lookup: lookupUser}
	gids := &idList{ids: &cfg.AllowGIDs, lookup: lookupGroup}
	fs.Var(uids, name("allow-uid", "SAVEPOINT_ALLOW_UID"),
		"admit only Unix-socket callers with this `uid` or user name (repeatable, or a comma list; with --allow-gid, either admits) (env SAVEPOINT_ALLOW_UID)")
	fs.Var(gids, name("allow-gid", "SAVEPOINT_ALLOW_GID"),
		"admit only Unix-socket callers with this primary or supplementary `gid` or group name (repeatable, or a comma list) (env SAVEPOINT_ALLOW_GID)")
	fs.StringVar(&cfg.TLSCertFile, name("tls-cert", "SAVEPOINT_SERVER_TLS_CERT"), cfg.TLSCertFile,
		"server certificate PEM `file` for a TCP listener (mutual TLS 1.3, with --tls-key and --tls-client-ca) (env SAVEPOINT_SERVER_TLS_CERT)")
	fs.StringVar(&cfg.TLSKeyFile, name("tls-key", "SAVEPOINT_SERVER_TLS_KEY"), cfg.TLSKeyFile,
		"server private key PEM `file` (env SAVEPOINT_SERVER_TLS_KEY)")
	fs.StringVar(&cfg.TLSClientCAFile, name("tls-client-ca", "SAVEPOINT_SERVER_TLS_CLIENT_CA"), cfg.TLSClientCAFile,
		"PEM `file` of the CAs client certificates must chain to (env SAVEPOINT_SERVER_TLS_CLIENT_CA)")
	fs.StringVar(&cfg.Store.EncryptionKeyFile, name("encryption-key-file", "SAVEPOINT_ENCRYPTION_KEY_FILE"), cfg.Store.EncryptionKeyFile,
		"`file` of 16, 24 or 32 raw bytes: the AES key that encrypts the data directory (env SAVEPOINT_ENCRYPTION_KEY_FILE)")
	fs.StringVar(&cfg.MetricsAddr, name("metrics-addr", "SAVEPOINT_METRICS_ADDR"), cfg.MetricsAddr,
		"serve Prometheus /metrics and /debug/pprof/ on this loopback `HOST:PORT` (env SAVEPOINT_METRICS_ADDR)")
	fs.BoolVar(&cfg.MetricsAllowRemote, name("metrics-allow-remote", "SAVEPOINT_METRICS_ALLOW_REMOTE"), cfg.MetricsAllowRemote,
		"let --metrics-addr be a non-loopback address: they have no authentication (env SAVEPOINT_METRICS_ALLOW_REMOTE)")
	fs.StringVar(&cfg.LogFormat, name("log-format", "SAVEPOINT_LOG_FORMAT"), cfg.LogFormat,
		"log `format`: text (when empty) or json (env SAVEPOINT_LOG_FORMAT)")
	return []*idList{uids, gids}
}

// idList is a flag.Value of numeric ids or names, repeatable and comma
// separated.
type idList struct {
	ids     *[]uint32
	lookup  func(name string) (string, error) // name -> numeric id
	replace bool                              // the next Set starts a new list
}

func (l *idList) String() string {
	if l == nil || l.ids == nil {
		return ""
	}
	s := make([]string, len(*l.ids))
	for i, id := range *l.ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}

func (l *idList) Set(v string) error {
	if l.replace {
		*l.ids, l.replace = nil, false
	}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		num := f
		if _, err := strconv.ParseUint(f, 10, 32); err != nil {
			if num, err = l.lookup(f); err != nil {
				return fmt.Errorf("%q is neither a number nor a known name: %v", f, err)
			}
		}
		id, err := strconv.ParseUint(num, 10, 32)
		if err != nil {
			return fmt.Errorf("%q: id %q is not a 32-bit number", f, num)
		}
		*l.ids = append(*l.ids, uint32(id))
	}
	return nil
}

func lookupUser(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

func lookupGroup(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	"github.com/coreos/go-systemd/v22/activation"
	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/savepoint-dev/savepoint/internal/addr"
)

// savepointd speaks systemd's readiness protocol (sd_notify) when
// NOTIFY_SOCKET is set, as under Type=notify: EXTEND_TIMEOUT_USEC while the
// store opens, READY=1 once the listener is bound and served, WATCHDOG=1
// while the store's liveness probe passes, STOPPING=1 at shutdown. Without
// NOTIFY_SOCKET each of these does nothing. docs/operations.md describes the
// units that use them.

// extendPeriod is how often NotifyStarting asks for more start time; each
// request is for three periods, so one lost datagram costs nothing.
var extendPeriod = 5 * time.Second

// notify sends state to the service manager, if there is one. A failure is
// logged and otherwise ignored: the daemon serves as well without it.
func notify(logger *slog.Logger, state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		logger.Warn("cannot notify the service manager", "state", state, "err", err)
	}
}

// NotifyStarting tells the service manager that savepointd is starting and,
// every few seconds until the returned stop is called, to extend its start
// timeout (EXTEND_TIMEOUT_USEC), so that a store open replaying a long log
// is not killed by TimeoutStartSec. Call stop once the open has returned;
// Run then sends READY=1.
func NotifyStarting(logger *slog.Logger) (stop func()) {
	if logger == nil {
		logger = slog.Default()
	}
	extend := "EXTEND_TIMEOUT_USEC=" + strconv.FormatInt((3*extendPeriod).Microseconds(), 10)
	notify(logger, "STATUS=opening the store\n"+extend)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(extendPeriod)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				notify(logger, extend)
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// watchdog pings the service manager's watchdog (WATCHDOG=1) four times per
// WatchdogSec interval, but only after store.Ping passes within half the
// interval: a stuck commit stops the pings and systemd restarts
// the daemon, while a full disk, which Ping passes, does not. It returns at
// once when the watchdog is off (WATCHDOG_USEC unset, or WATCHDOG_PID naming
// another process), else when ctx is done.
func watchdog(ctx context.Context, store core.Store, logger *slog.Logger) {
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		logger.Warn("the watchdog settings are unusable; not pinging", "err", err)
		return
	}
	if interval <= 0 {
		return
	}
	logger.Info("watchdog on", "interval", interval)
	t := time.NewTicker(interval / 4)
	defer t.Stop()
	healthy := true
	for {
		pctx, cancel := context.WithTimeout(ctx, interval/2)
		err := store.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			if !healthy {
				logger.Info("the store's liveness probe passes again; watchdog pings resumed")
			}
			notify(logger, sd.SdNotifyWatchdog)
		case healthy:
			logger.Error("the store's liveness probe failed; watchdog pings stopped, so systemd restarts savepointd unless it recovers", "err", err)
		}
		healthy = err == nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// activated returns the socket systemd passed (LISTEN_FDS and LISTEN_PID,
// as a .socket unit does), or nil when none was. It fails unless exactly
// one listening stream socket was passed, bound to the address cfg.Listen
// names: the passed socket replaces --listen, so the two must agree for the
// checks made on --listen (loopback only) to hold for it and for clients
// resolving --listen's address to find it.
func activated(cfg Config) (net.Listener, error) {
	lis, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("%w: systemd socket activation: %v", ErrConfig, err)
	}
	switch {
	case len(lis) == 0:
		return nil, nil
	case len(lis) > 1 || lis[0] == nil:
		for _, l := range lis {
			if l != nil {
				l.Close()
			}
		}
		return nil, fmt.Errorf("%w: systemd passed %d sockets; savepointd takes exactly one listening stream socket (one ListenStream= in savepointd.socket)", ErrConfig, len(lis))
	}
	if err := sameAddr(cfg.Listen, lis[0].Addr()); err != nil {
		lis[0].Close()
		return nil, err
	}
	return lis[0], nil
}

// sameAddr reports whether the passed socket's address a is the one listen
// names.
func sameAddr(listen string, a net.Addr) error {
	network, address, err := addr.Parse(listen)
	if err != nil {
		return fmt.Errorf("%w: listen: %v", ErrConfig, err)
	}
	ok := false
	switch got := a.(type) {
	case *net.UnixAddr:
		ok = network == "unix" && filepath.Clean(got.Name) == filepath.Clean(address)
	case *net.TCPAddr:
		if want, err := net.ResolveTCPAddr("tcp", address); err == nil && network == "tcp" {
			ok = want.IP.Equal(got.IP) && want.Port == got.Port
		}
	}
	if !ok {
		return fmt.Errorf("%w: systemd passed a socket on %s %s, but --listen (or SAVEPOINT_ADDR) is %s; make them name the same address (savepointd.socket's ListenStream=)",
			ErrConfig, a.Network(), a.String(), listen)
	}
	return nil
}

// ErrConfig is returned by Run when the configuration cannot be served as
// it is, such as a socket passed by systemd on another address than
// --listen; savepointd exits 2 for it, like for a bad flag.
var ErrConfig = errors.New("invalid configuration")

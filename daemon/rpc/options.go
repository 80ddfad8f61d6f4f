package rpc

import (
	"log/slog"
	"time"
)

// Limits are the sizes the services enforce and report. A zero field means
// its default, as DefaultLimits sets it.
type Limits struct {
	// MaxRequestBytes is the largest request accepted, enforced by the
	// request codec (NewRequestCodec) and reported by GetServerInfo; zero
	// means 4 MiB.
	MaxRequestBytes int
	// MaxMessageBytes caps a message's content_json and an effect's output;
	// zero means 2 MiB.
	MaxMessageBytes int
	// MaxStateBytes caps a checkpoint's state_json; zero means 1 MiB.
	MaxStateBytes int
	// ResponseBudgetBytes is how many bytes of checkpoint and messages one
	// response carries before the rest is paged; zero means 3 MiB.
	ResponseBudgetBytes int
}

// DefaultLimits returns the limits savepointd serves with when none is set.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes:     4 << 20,
		MaxMessageBytes:     2 << 20,
		MaxStateBytes:       1 << 20,
		ResponseBudgetBytes: 3 << 20,
	}
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = d.MaxRequestBytes
	}
	if l.MaxMessageBytes == 0 {
		l.MaxMessageBytes = d.MaxMessageBytes
	}
	if l.MaxStateBytes == 0 {
		l.MaxStateBytes = d.MaxStateBytes
	}
	if l.ResponseBudgetBytes == 0 {
		l.ResponseBudgetBytes = d.ResponseBudgetBytes
	}
	return l
}

// Options configure NewServer and NewGraphServer. The zero Options serve
// with DefaultLimits, log to slog.Default() and report version "unknown".
type Options struct {
	// Limits are the sizes enforced; zero fields take their defaults.
	Limits Limits
	// Logger receives internal errors; nil means slog.Default().
	Logger *slog.Logger
	// Version is what GetServerInfo reports as the server's version; empty
	// means "unknown".
	Version string
	// Commit is what GetServerInfo reports as the commit the server was
	// built from; empty when unknown.
	Commit string
	// StartedOnDemand is what GetServerInfo reports as started_on_demand:
	// that a client started the daemon, not an operator.
	StartedOnDemand bool
	// PollInterval is how often a store shared with other processes
	// (core.ChangePoller) is read for their changes while anyone watches;
	// zero means core.DefaultPollInterval.
	PollInterval time.Duration
	// CallStreamMaxInFlight is what GetServerInfo reports as
	// call_stream_max_in_flight: the StreamServer's MaxInFlight, or zero
	// when the daemon serves no CallStreamService.
	CallStreamMaxInFlight int
}

func (o Options) withDefaults() Options {
	o.Limits = o.Limits.WithDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Version == "" {
		o.Version = "unknown"
	}
	return o
}

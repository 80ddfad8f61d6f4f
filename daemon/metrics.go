package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/savepoint-dev/savepoint/daemon/core"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// validateObservability checks the log format and the metrics address:
// /metrics and /debug/pprof/ answer anyone who reaches them, so they stay on
// loopback unless MetricsAllowRemote says otherwise.
func (c Config) validateObservability() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := checkLogFormat(c.LogFormat); err != nil {
		errs = append(errs, err)
	}
	if c.MetricsAddr == "" {
		if c.MetricsAllowRemote {
			add("metrics allow remote: set without --metrics-addr")
		}
		return errs
	}
	host, port, err := net.SplitHostPort(c.MetricsAddr)
	if err != nil {
		add("metrics addr: %q is not HOST:PORT", c.MetricsAddr)
		return errs
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		add("metrics addr: %q: port %q is not a number in 0-65535", c.MetricsAddr, port)
	}
	if !isLoopback(host) && !c.MetricsAllowRemote {
		add("metrics addr: %q is not a loopback address; /metrics and /debug/pprof/ have no authentication, "+
			"so use 127.0.0.1:PORT or [::1]:PORT, or give --metrics-allow-remote to serve them to the network", c.MetricsAddr)
	}
	return errs
}

// metrics are the daemon's Prometheus series: gRPC calls by method and code
// (go-grpc-middleware), what the calls did to the store, the store's own
// collector when it has one, and the Go runtime's and the process's.
type metrics struct {
	reg         *prometheus.Registry
	rpc         *grpcprom.ServerMetrics
	savedBytes  prometheus.Counter
	ledger      prometheus.Counter
	fenced      prometheus.Counter
	resolutions *prometheus.CounterVec
	resolved    *prometheus.CounterVec
	// threadBegins counts BeginThreadEffect's answers: a thread ledger's
	// counterpart of resolutions (its in_doubt, the calls in doubt found).
	threadBegins *prometheus.CounterVec
	approvals    *prometheus.CounterVec
}

func newMetrics(store core.Store) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		rpc: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}))),
		savedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "savepoint_saved_bytes_total",
			Help: "Bytes of SaveCheckpoint requests acknowledged (their encoded size).",
		}),
		ledger: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "savepoint_ledger_entries_recorded_total",
			Help: "Effects added to the side-effects ledger by RecordEffect (repeats of a recorded effect not counted).",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "savepoint_fenced_writes_total",
			Help: "Writes refused with SESSION_FENCED: a process wrote to a session another one had resumed.",
		}),
		resolutions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "savepoint_reconcile_resolutions_total",
			Help: "Pending tool uses Reconcile answered, by decision (reuse, run, in_doubt).",
		}, []string{"decision"}),
		resolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "savepoint_effects_resolved_total",
			Help: "Tool uses in doubt ResolveEffect settled, by resolver (verify, person) and outcome (done, not_done); repeats not counted.",
		}, []string{"resolver", "outcome"}),
		threadBegins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "savepoint_thread_effect_begins_total",
			Help: "BeginThreadEffect answers, by decision (reuse, run, in_doubt): in_doubt is a graph thread's call found in doubt; late begins dropped not counted.",
		}, []string{"decision"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "savepoint_effect_approvals_total",
			Help: "Decisions on tool uses that require approval (ApproveEffect, ApproveThreadEffect), by decision (approved, denied); repeats not counted.",
		}, []string{"decision"}),
	}
	for _, d := range []string{"approved", "denied"} {
		m.approvals.WithLabelValues(d)
	}
	for _, d := range []string{"reuse", "run", "in_doubt"} {
		m.resolutions.WithLabelValues(d)
		m.threadBegins.WithLabelValues(d)
	}
	for _, r := range []string{"verify", "person"} {
		for _, o := range []string{"done", "not_done"} {
			m.resolved.WithLabelValues(r, o)
		}
	}
	m.reg.MustRegister(m.rpc, m.savedBytes, m.ledger, m.fenced, m.resolutions, m.resolved, m.threadBegins, m.approvals,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c, ok := store.(prometheus.Collector); ok {
		m.reg.MustRegister(c)
	}
	return m
}

// observe counts what a finished call did.
func (m *metrics) observe(method string, req, resp any, err error) {
	if err != nil {
		if reasonOf(err) == "SESSION_FENCED" {
			m.fenced.Inc()
		}
		return
	}
	switch r := resp.(type) {
	case *savepointv1.SaveCheckpointResponse:
		if q, ok := req.(proto.Message); ok {
			m.savedBytes.Add(float64(proto.Size(q)))
		}
	case *savepointv1.RecordEffectResponse:
		if !r.GetAlreadyRecorded() {
			m.ledger.Inc()
		}
	case *savepointv1.ResolveEffectResponse:
		if res := r.GetEntry().GetResolution(); res != nil && !r.GetAlreadyResolved() {
			m.resolved.WithLabelValues(resolverLabel(res.GetResolverKind()), outcomeLabel(res.GetOutcome())).Inc()
		}
	case *savepointv1.ResolveThreadEffectResponse:
		if res := r.GetEffect().GetResolution(); res != nil && !r.GetAlreadyResolved() {
			m.resolved.WithLabelValues(resolverLabel(res.GetResolverKind()), outcomeLabel(res.GetOutcome())).Inc()
		}
	case *savepointv1.BeginThreadEffectResponse:
		if d := decisionLabel(r.GetDecision()); d != "" && !r.GetDroppedLate() {
			m.threadBegins.WithLabelValues(d).Inc()
		}
	case *savepointv1.ApproveEffectResponse:
		if !r.GetAlreadyDecided() {
			m.approvals.WithLabelValues(approvalLabel(r.GetEntry().GetApproval())).Inc()
		}
	case *savepointv1.ApproveThreadEffectResponse:
		if !r.GetAlreadyDecided() {
			m.approvals.WithLabelValues(approvalLabel(r.GetEffect().GetApproval())).Inc()
		}
	case *savepointv1.ReconcileResponse:
		for _, res := range r.GetResolutions() {
			if d := decisionLabel(res.GetDecision()); d != "" {
				m.resolutions.WithLabelValues(d).Inc()
			}
		}
	}
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	m.observe(info.FullMethod, req, resp, err)
	return resp, err
}

// resolverLabel and outcomeLabel are savepoint_effects_resolved_total's
// labels: the enum value's name, lower case, without its prefix.
func resolverLabel(k savepointv1.ResolverKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "RESOLVER_KIND_"))
}

func outcomeLabel(o savepointv1.ResolutionOutcome) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "RESOLUTION_OUTCOME_"))
}

// decisionLabel is a decision's label: reuse, run or in_doubt; "" for
// another value.
func decisionLabel(d savepointv1.Decision) string {
	switch d {
	case savepointv1.Decision_DECISION_REUSE:
		return "reuse"
	case savepointv1.Decision_DECISION_RUN:
		return "run"
	case savepointv1.Decision_DECISION_IN_DOUBT:
		return "in_doubt"
	}
	return ""
}

// reasonOf returns the ErrorInfo reason of a status error, or "".
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// serveMetrics serves /metrics and /debug/pprof/ on addr until stop is
// called. The listener is open when it returns.
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) (stop func(), bound net.Addr, err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "savepointd: /metrics (Prometheus), /debug/pprof/ (Go profiles)")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server failed", "err", err)
		}
	}()
	logger.Info("serving metrics", "metrics_addr", lis.Addr().String(), "paths", strings.Join([]string{"/metrics", "/debug/pprof/"}, " "))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, lis.Addr(), nil
}

// approvalLabel is a decision's label of savepoint_effect_approvals_total.
func approvalLabel(a *savepointv1.EffectApproval) string {
	if a.GetStatus() == savepointv1.ApprovalStatus_APPROVAL_STATUS_DENIED {
		return "denied"
	}
	return "approved"
}

package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// sample is one reading of the daemon's counters.
type sample struct {
	at             time.Time
	saves, commits uint64
}

// rates keeps the last minute of counter readings, to compute saves and
// commits per second over it.
type rates struct {
	mu      sync.Mutex
	samples []sample
}

// add records a reading and returns the rates per second since the oldest
// reading of the last minute; ok is false until two readings span a second.
func (r *rates) add(s sample) (saves, commits float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.samples); n > 0 && s.saves < r.samples[n-1].saves {
		r.samples = nil // the daemon restarted: its counters did too
	}
	r.samples = append(r.samples, s)
	for len(r.samples) > 1 && s.at.Sub(r.samples[0].at) > time.Minute {
		r.samples = r.samples[1:]
	}
	old := r.samples[0]
	secs := s.at.Sub(old.at).Seconds()
	if secs < 1 {
		return 0, 0, false
	}
	return float64(s.saves-old.saves) / secs, float64(s.commits-old.commits) / secs, true
}

type serverData struct {
	Info             *savepointv1.GetServerInfoResponse
	Health           string
	Uptime           string
	StoreBytes       string
	SavesPerSecond   string
	CommitsPerSecond string
}

func (s *Server) serverData(r *http.Request) (*serverData, error) {
	ctx, cancel := s.rpc(r)
	defer cancel()
	info, err := s.opts.Client.Raw().GetServerInfo(ctx, &savepointv1.GetServerInfoRequest{})
	if err != nil {
		return nil, err
	}
	d := &serverData{Info: info, Health: "unknown", StoreBytes: "-", SavesPerSecond: "(measuring)", CommitsPerSecond: "(measuring)"}
	if h, err := s.opts.Client.Health().Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err == nil {
		d.Health = map[grpc_health_v1.HealthCheckResponse_ServingStatus]string{grpc_health_v1.HealthCheckResponse_SERVING: "serving",
			grpc_health_v1.HealthCheckResponse_NOT_SERVING: "not serving"}[h.GetStatus()]
	} else {
		d.Health = "unknown: " + describe(err).Msg
	}
	if info.Uptime != nil {
		d.Uptime = info.GetUptime().AsDuration().Round(time.Second).String()
	}
	if info.StoreBytes != nil {
		d.StoreBytes = formatBytes(int(info.GetStoreBytes()))
	}
	if sv, cm, ok := s.rates.add(sample{time.Now(), info.GetSaves(), info.GetCommits()}); ok {
		d.SavesPerSecond, d.CommitsPerSecond = fmt.Sprintf("%.1f", sv), fmt.Sprintf("%.1f", cm)
	}
	return d, nil
}

func (s *Server) server(w http.ResponseWriter, r *http.Request) {
	d, err := s.serverData(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "server", "Server", "server", d)
}

// figures serves the Server page's live figures as JSON, which its script
// polls.
func (s *Server) figures(w http.ResponseWriter, r *http.Request) {
	d, err := s.serverData(r)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		e := describe(err)
		w.WriteHeader(e.Status)
		json.NewEncoder(w).Encode(map[string]string{"error": e.Msg, "reason": e.Reason})
		return
	}
	json.NewEncoder(w).Encode(map[string]string{"uptime": d.Uptime, "health": d.Health, "saves": fmt.Sprint(d.Info.GetSaves()),
		"commits": fmt.Sprint(d.Info.GetCommits()), "savesPerSecond": d.SavesPerSecond, "commitsPerSecond": d.CommitsPerSecond, "storeBytes": d.StoreBytes})
}

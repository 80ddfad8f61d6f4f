package daemontest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MetricsAddr returns the address a daemon's JSON log says it serves
// metrics on; the test fails when the log has no such line.
func MetricsAddr(t testing.TB, logs string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "serving metrics" {
			return m["metrics_addr"].(string)
		}
	}
	t.Fatalf("no 'serving metrics' line in:\n%s", logs)
	return ""
}

// Scrape returns the metric families served at addr's /metrics.
func Scrape(t testing.TB, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Value returns the value of the series of family name whose labels include
// labels (a counter, gauge, or a histogram's count); ok is false when there
// is none.
func Value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, lp := range m.Label {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, want := range labels {
			if have[k] != want {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

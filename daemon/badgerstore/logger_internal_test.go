package badgerstore

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// formatCounter counts how often it is formatted.
type formatCounter struct{ n *int }

func (c formatCounter) String() string { *c.n++; return "x" }

// TestBadgerLoggerLevels checks where each of Badger's levels goes, and that
// a line below the logger's level is never formatted (Badger logs debug
// lines on every write).
func TestBadgerLoggerLevels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		logger slog.Level
		call   func(badgerLogger, string, ...any)
		want   string // the level logged; empty when nothing is
	}{
		{"debug below info", slog.LevelInfo, badgerLogger.Debugf, ""},
		{"info below info", slog.LevelInfo, badgerLogger.Infof, ""},
		{"warning at info", slog.LevelInfo, badgerLogger.Warningf, "level=WARN"},
		{"error at info", slog.LevelInfo, badgerLogger.Errorf, "level=ERROR"},
		{"debug at debug", slog.LevelDebug, badgerLogger.Debugf, "level=DEBUG"},
		{"info at debug", slog.LevelDebug, badgerLogger.Infof, "level=DEBUG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			var formats int
			tc.call(badgerLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.logger}))}, "flushed %v", formatCounter{&formats})
			line := buf.String()
			if tc.want == "" {
				if line != "" || formats != 0 {
					t.Fatalf("logged %q, formatted %d times; want nothing, never formatted", line, formats)
				}
				return
			}
			if !strings.Contains(line, tc.want) || !strings.Contains(line, `msg="badger: flushed x"`) || formats != 1 {
				t.Fatalf("logged %q, formatted %d times; want %s and the message, formatted once", line, formats, tc.want)
			}
		})
	}
}

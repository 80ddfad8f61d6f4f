package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

const mib = 1 << 20

// Bench is one run of the benchmark: its settings, the directory it works
// in, and what it has measured so far.
type Bench struct {
	cfg     Config
	tmp     string // removed at the end
	rng     *rand.Rand
	tables  []*Table
	summary Summary
	log     func(format string, args ...any)
	dirs    int
}

// dir returns a new empty directory under the run's temporary directory.
func (b *Bench) dir() (string, error) {
	b.dirs++
	d := filepath.Join(b.tmp, strconv.Itoa(b.dirs))
	return d, os.Mkdir(d, 0o700)
}

// startDaemon starts savepointd on a new empty data directory.
func (b *Bench) startDaemon(ctx context.Context) (*Daemon, error) {
	d, err := b.dir()
	if err != nil {
		return nil, err
	}
	return StartDaemon(ctx, b.cfg.Savepointd, filepath.Join(d, "data"), d)
}

// pointA is the save of a model reply that names one tool call, and pointB
// the save of that call's result, each one message of MessageBytes.
func (b *Bench) pointA(i int) *Save {
	return newSave([]*savepointv1.Message{textMessage(b.rng, "assistant", b.cfg.MessageBytes)},
		[]*savepointv1.ToolUse{{
			ToolUseId: fmt.Sprintf("toolu_%d", i), Name: "send_email", InputJson: fmt.Sprintf(`{"n":%d}`, i),
			EffectClass: savepointv1.EffectClass_EFFECT_CLASS_READ_ONLY,
		}})
}

func (b *Bench) pointB() *Save {
	return newSave([]*savepointv1.Message{textMessage(b.rng, "user", b.cfg.MessageBytes)}, nil)
}

package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The crash points, in the order they happen within one turn. N in
// LABEL:N is the turn (the checkpoint's turn counter); during a resume the
// pending turn's points fire with that turn's number.
var labels = []string{
	// Point A saved: the assistant message and its pending tool uses are
	// in the checkpoint, no tool has started (seed moment 1).
	"after-save-a",
	// BeginEffect marked a side-effecting tool use as dispatched; the tool
	// has not run. Never fires for a read-only tool (it is not begun).
	"after-begin",
	// The tool returned, its outcome is not in the ledger (seed moment 2).
	"after-tool",
	// RecordEffect wrote the outcome to the ledger; Point B not saved (the
	// seed's demo).
	"after-effect-write",
	// Point B saved: the tool results are in the history, nothing is
	// pending (seed moment 3).
	"after-save-b",
}

// point is a crash or pause point: LABEL:N, or LABEL:N:TOOL to pick one
// tool use of a turn that names several (without TOOL, the first tool use
// to reach the label).
type point struct {
	label string
	turn  uint32
	tool  string
	raw   string
}

func parsePoint(s string) (*point, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("%q: want LABEL:N or LABEL:N:TOOL", s)
	}
	if !slices.Contains(labels, parts[0]) {
		return nil, fmt.Errorf("%q: unknown label %q (have %s)", s, parts[0], strings.Join(labels, ", "))
	}
	n, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("%q: the turn must be a number from 1", s)
	}
	p := &point{label: parts[0], turn: uint32(n), raw: s}
	if len(parts) == 3 {
		if parts[2] == "" {
			return nil, fmt.Errorf("%q: empty tool name", s)
		}
		p.tool = parts[2]
	}
	return p, nil
}

// matches says whether the point is reached: label at turn, for tool ("" for
// the points that are not about one tool use).
func (p *point) matches(label string, turn uint32, tool string) bool {
	return p != nil && p.label == label && p.turn == turn && (p.tool == "" || p.tool == tool)
}

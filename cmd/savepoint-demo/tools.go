package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/savepoint-dev/savepoint/client"
)

// The files the demo keeps in its work directory.
const (
	notesFile  = "sales-notes.txt"
	reportFile = "report.txt"
	// writesFile gets one line per real write of report.txt, so a double
	// write is visible: after a finished run it must hold exactly one line,
	// or none when the write was in doubt and had not happened.
	writesFile = "report.writes"
)

// sampleNotes is written to the work directory when it has no
// sales-notes.txt at a fresh start.
//
//go:embed sales-notes.txt
var sampleNotes string

// tool is one of the demo's tools: what it does to the world (its effect
// class, which the daemon uses to decide what is safe after a crash) and
// how to run it.
type tool struct {
	class client.EffectClass
	run   func(dir string, in toolInput, key string) (string, error)
}

type toolInput struct {
	File string `json:"file"`
	Text string `json:"text"`
}

var tools = map[string]tool{
	"read_notes": {class: client.ReadOnly, run: func(dir string, in toolInput, _ string) (string, error) {
		b, err := readFile(dir, in.File)
		return string(b), err
	}},
	"count_words": {class: client.ReadOnly, run: func(dir string, in toolInput, _ string) (string, error) {
		b, err := readFile(dir, in.File)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d words", len(strings.Fields(string(b)))), nil
	}},
	"write_report": {class: client.SideEffect, run: writeReport},
}

// classOf returns a tool's effect class; an unknown tool counts as
// side-effecting, the safe assumption.
func classOf(name string) client.EffectClass {
	if t, ok := tools[name]; ok {
		return t.class
	}
	return client.SideEffect
}

// runTool is the client.ToolFunc that runs the model's tool calls in dir.
func runTool(dir string) client.ToolFunc {
	return func(_ context.Context, call client.ToolUse, key string) (string, error) {
		t, ok := tools[call.Name]
		if !ok {
			return "", fmt.Errorf("unknown tool %q", call.Name)
		}
		var in toolInput
		if call.InputJSON != "" {
			if err := json.Unmarshal([]byte(call.InputJSON), &in); err != nil {
				return "", fmt.Errorf("bad input for %s: %v", call.Name, err)
			}
		}
		return t.run(dir, in, key)
	}
}

// path checks that name is a plain file name and returns it inside dir.
func path(dir, name string) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("file %q: want a plain file name in the work directory", name)
	}
	return filepath.Join(dir, name), nil
}

func readFile(dir, name string) ([]byte, error) {
	p, err := path(dir, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", name)
	}
	return b, err
}

// writeReport is the side effect: it replaces the report (write to a temp
// file, then rename) and appends a line to report.writes, the count of real
// writes.
func writeReport(dir string, in toolInput, key string) (string, error) {
	p, err := path(dir, in.File)
	if err != nil {
		return "", err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(in.Text), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(dir, writesFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	_, err = fmt.Fprintf(f, "%s key=%s\n", in.File, key)
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Wrote %d bytes to %s", len(in.Text), in.File), nil
}

// countWrites returns how many times write_report really wrote, from
// report.writes.
func countWrites(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, writesFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
}

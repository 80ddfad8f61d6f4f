// Package addrtest reads the address cases of internal/addr's
// testdata/addresses.json, which the Go tests of internal/addr and client
// and the Python and TypeScript clients' tests all run, so that every parser
// accepts and refuses the same addresses with the same errors.
package addrtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Cases are the parse, default-address and state-directory cases of the file.
type Cases struct {
	Parse []struct {
		Input string `json:"input"`
		OK    bool   `json:"ok"`
		Want  struct {
			Network string `json:"network"`
			Address string `json:"address"`
			Host    string `json:"host"`
			Port    string `json:"port"`
		} `json:"want"`
		Error string `json:"error"` // when !OK: the error's text
	} `json:"parse"`
	Default []struct {
		Name string            `json:"name"`
		Env  map[string]string `json:"env"`
		Want string            `json:"want"`
	} `json:"default"`
	State []struct {
		Name string            `json:"name"`
		Env  map[string]string `json:"env"`
		Want string            `json:"want"`
	} `json:"state"`
}

// Load returns the cases, failing t when the file cannot be read or holds
// none. It finds the file from this source file's path, so the caller's
// working directory does not matter.
func Load(t testing.TB) Cases {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("addrtest: cannot find its own source file")
	}
	path := filepath.Join(filepath.Dir(self), "..", "testdata", "addresses.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c Cases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(c.Parse) == 0 || len(c.Default) == 0 || len(c.State) == 0 {
		t.Fatalf("%s holds no cases", path)
	}
	return c
}

package addr

import (
	"encoding/json"
	"net"
	"os"
	"testing"
)

// cases are the address cases of testdata/addresses.json, which the Python
// and TypeScript clients' tests read too, so that every parser accepts and
// refuses the same addresses with the same errors.
type cases struct {
	Parse []struct {
		Input string `json:"input"`
		OK    bool   `json:"ok"`
		Want  struct {
			Network string `json:"network"`
			Address string `json:"address"`
			Host    string `json:"host"`
			Port    string `json:"port"`
		} `json:"want"`
		Error string `json:"error"`
	} `json:"parse"`
	Default []struct {
		Name string            `json:"name"`
		Env  map[string]string `json:"env"`
		Want string            `json:"want"`
	} `json:"default"`
}

func loadCases(t *testing.T) cases {
	t.Helper()
	b, err := os.ReadFile("testdata/addresses.json")
	if err != nil {
		t.Fatal(err)
	}
	var c cases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Parse) == 0 || len(c.Default) == 0 {
		t.Fatal("testdata/addresses.json holds no cases")
	}
	return c
}

func TestDefault(t *testing.T) {
	for _, tt := range loadCases(t).Default {
		t.Run(tt.Name, func(t *testing.T) {
			if got := Default(func(k string) string { return tt.Env[k] }); got != tt.Want {
				t.Errorf("Default(%v) = %q, want %q", tt.Env, got, tt.Want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tt := range loadCases(t).Parse {
		t.Run(tt.Input, func(t *testing.T) {
			network, address, err := Parse(tt.Input)
			if !tt.OK {
				if err == nil || err.Error() != tt.Error || network != "" || address != "" {
					t.Errorf("Parse(%q) = %q, %q, %v; want the error %q", tt.Input, network, address, err, tt.Error)
				}
				return
			}
			if err != nil || network != tt.Want.Network || address != tt.Want.Address {
				t.Fatalf("Parse(%q) = %q, %q, %v; want %q, %q", tt.Input, network, address, err, tt.Want.Network, tt.Want.Address)
			}
			if network == "tcp" {
				host, port, err := net.SplitHostPort(address)
				if err != nil || host != tt.Want.Host || port != tt.Want.Port {
					t.Errorf("the address %q splits into %q, %q, %v; want host %q, port %q", address, host, port, err, tt.Want.Host, tt.Want.Port)
				}
			}
		})
	}
}

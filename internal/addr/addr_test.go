package addr

import "testing"

func TestDefault(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", nil, "unix:/run/savepoint/savepoint.sock"},
		{"xdg", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, "unix:/run/user/1000/savepoint/savepoint.sock"},
		{"xdg trailing slash", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000/"}, "unix:/run/user/1000/savepoint/savepoint.sock"},
		{"SAVEPOINT_ADDR wins", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "SAVEPOINT_ADDR": "127.0.0.1:7070"}, "127.0.0.1:7070"},
		{"SAVEPOINT_ADDR unix", map[string]string{"SAVEPOINT_ADDR": "unix:/tmp/sp.sock"}, "unix:/tmp/sp.sock"},
		{"empty values ignored", map[string]string{"SAVEPOINT_ADDR": "", "XDG_RUNTIME_DIR": ""}, "unix:/run/savepoint/savepoint.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Default(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("Default(%v) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		addr, network, address string
		ok                     bool
	}{
		{"unix:/run/savepoint/savepoint.sock", "unix", "/run/savepoint/savepoint.sock", true},
		{"unix:relative/sp.sock", "unix", "relative/sp.sock", true},
		{"unix:///tmp/sp.sock", "unix", "/tmp/sp.sock", true},
		{"unix:/tmp/odd #%?.sock", "unix", "/tmp/odd #%?.sock", true},
		{"127.0.0.1:7070", "tcp", "127.0.0.1:7070", true},
		{"localhost:7070", "tcp", "localhost:7070", true},
		{"[::1]:0", "tcp", "[::1]:0", true},
		{"unix:", "", "", false},
		{"unix://relative", "", "", false},
		{"localhost", "", "", false},
		{"localhost:", "", "", false},
		{"127.0.0.1:http", "", "", false},
		{"127.0.0.1:70000", "", "", false},
		{":7777", "", "", false},
		{"", "", "", false},
		{"/run/savepoint/savepoint.sock", "", "", false},
		{"http://localhost:7070", "", "", false},
		{"a/b:7070", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			network, address, err := Parse(tt.addr)
			if (err == nil) != tt.ok || network != tt.network || address != tt.address {
				t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q, ok=%v", tt.addr, network, address, err, tt.network, tt.address, tt.ok)
			}
		})
	}
}

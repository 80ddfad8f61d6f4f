package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/savepoint-dev/savepoint/"

// The layers, lowest first: the domain and its stores, the gRPC adapter,
// the host. Each may import only the layers below it.
var (
	domain  = []string{"daemon/core", "daemon/badgerstore", "daemon/pgstore"}
	adapter = "daemon/rpc"
	host    = "daemon"
)

// deps returns the packages pkg depends on, failing the test when pkg does
// not exist, so that a renamed layer cannot leave the check guarding
// nothing.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestDomainImportsNoTransport checks the seam: the domain and the stores
// depend on neither gRPC, the API's messages, the adapter nor the host, so
// the storage format cannot move with the public API.
func TestDomainImportsNoTransport(t *testing.T) {
	for _, pkg := range domain {
		for _, dep := range deps(t, pkg) {
			if strings.HasPrefix(dep, "google.golang.org/grpc") || dep == mod+"proto/savepoint/v1" ||
				dep == mod+adapter || dep == mod+host {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestAdapterBelowHost checks that the gRPC adapter imports the domain but
// nothing of the host that serves it.
func TestAdapterBelowHost(t *testing.T) {
	var core bool
	for _, dep := range deps(t, adapter) {
		if dep == mod+host || strings.HasPrefix(dep, mod+"cmd/") {
			t.Errorf("%s depends on %s", adapter, dep)
		}
		core = core || dep == mod+"daemon/core"
	}
	if !core {
		t.Errorf("%s does not depend on daemon/core: is it still the adapter?", adapter)
	}
}

// TestDaemonImportsNoClientNorTests checks that no package under daemon/,
// its tests included, depends on a client or on the end-to-end harnesses
// under tests/ (which start the real binary and drive it through the
// client): the daemon is built and tested below them, as etcd's server is
// below its tests/.
func TestDaemonImportsNoClientNorTests(t *testing.T) {
	out, err := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", mod+"daemon/...").Output()
	if err != nil {
		t.Fatalf("go list -test %sdaemon/...: %v", mod, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < len(domain)+2 {
		t.Fatalf("go list named %d packages under daemon/, fewer than its layers", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if dep == mod+"client" || strings.HasPrefix(dep, mod+"client/") || strings.HasPrefix(dep, mod+"tests/") {
				t.Errorf("%s depends on %s", fields[0], dep)
			}
		}
	}
}

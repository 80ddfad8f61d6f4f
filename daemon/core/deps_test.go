package core_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainImportsNoTransport checks the seam: the domain and the stores
// depend on neither gRPC, the API's messages nor the adapter, so the storage
// format cannot move with the public API.
func TestDomainImportsNoTransport(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	const mod = "github.com/savepoint-dev/savepoint/"
	for _, pkg := range []string{"daemon/core", "daemon/badgerstore", "daemon/pgstore"} {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "google.golang.org/grpc") ||
				dep == mod+"daemon" || dep == mod+"proto/savepoint/v1" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

package storage

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStorageDeps: the store does not depend on the file readers (package
// ingest, the parquet-go module), the query engine or the analyses: it
// stores events, whatever reads them and whatever asks (issue 15).
func TestStorageDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/parquet-go/parquet-go" || strings.HasPrefix(dep, "github.com/parquet-go/parquet-go/"),
			dep == "github.com/spurdb/spur/ingest", strings.HasPrefix(dep, "github.com/spurdb/spur/query"):
			t.Errorf("storage depends on %s", dep)
		}
	}
}

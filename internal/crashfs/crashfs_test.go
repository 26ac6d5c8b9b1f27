package crashfs

import (
	"errors"
	"io/fs"
	"testing"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/storage/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCrashKeepsOnlySynced pins the semantics the store's crash tests rely
// on: unsynced data and unsynced directory entries are lost; a rename is
// durable only after the directory sync.
func TestCrashKeepsOnlySynced(t *testing.T) {
	f := New()
	if err := f.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.SyncDir(f, ""); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(f, "d", "a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	w, err := f.Create("d/b")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("unsynced"))
	w.Close()
	c := f.Crash(0, nil)
	if b, err := vfs.ReadFile(c, "d/a"); err != nil || string(b) != "one" {
		t.Fatalf("d/a after crash: %q, %v", b, err)
	}
	if _, err := c.Stat("d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced d/b survived the crash: %v", err)
	}
	if f.Syncs() == 0 {
		t.Fatal("no sync counted")
	}
}

// Package tzlist lists the zones of the host's tz database, for tests
// that check time-zone code in every zone.
package tzlist

import (
	"archive/zip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

var (
	once  sync.Once
	names []string
	err   error
)

// Names returns the names of every zone of the host's tz database, links
// included (every TZif file under $ZONEINFO, else /usr/share/zoneinfo,
// but for the posix/ and right/ copies, posixrules and localtime), or,
// where there is none, the zones of Go's lib/time/zoneinfo.zip; sorted.
// The slice is shared: do not modify it. The error says why neither could
// be read.
func Names() ([]string, error) {
	once.Do(func() { names, err = list() })
	return names, err
}

func list() ([]string, error) {
	root := os.Getenv("ZONEINFO")
	if fi, err := os.Stat(root); root == "" || err != nil || !fi.IsDir() {
		root = "/usr/share/zoneinfo"
	}
	var out []string
	werr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "posix" || d.Name() == "right" { // copies of the zones, and zones with leap seconds
				return filepath.SkipDir
			}
			return nil
		}
		name := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if name == "posixrules" || name == "localtime" {
			return nil
		}
		f, err := os.Open(path) // follows links: they are zones too
		if err != nil {
			return nil
		}
		head := make([]byte, 4)
		_, err = f.Read(head)
		f.Close()
		if err == nil && string(head) == "TZif" {
			out = append(out, name)
		}
		return nil
	})
	if len(out) == 0 {
		// Tests run from the toolchain that built them, so its GOROOT is
		// there (runtime.GOROOT is deprecated for copied binaries only).
		//lint:ignore SA1019 tests run beside the toolchain that built them
		zr, zerr := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
		if zerr != nil {
			return nil, errors.Join(werr, zerr)
		}
		defer zr.Close()
		for _, f := range zr.File {
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

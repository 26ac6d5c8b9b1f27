package server

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestVendoredHashes: every vendored library is the file its README
// names, byte for byte (sha256), so an update goes through update.sh and
// the README.
func TestVendoredHashes(t *testing.T) {
	readme, err := fs.ReadFile(uiFiles, "ui/vendor/README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := regexp.MustCompile(`(?m)^([0-9a-f]{64})  (\S+)$`).FindAllStringSubmatch(string(readme), -1)
	if len(lines) < 5 {
		t.Fatalf("README lists %d hashes", len(lines))
	}
	for _, l := range lines {
		b, err := fs.ReadFile(uiFiles, "ui/vendor/"+l[2])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != l[1] {
			t.Errorf("%s: sha256 %s, README says %s", l[2], got, l[1])
		}
	}
	if js, _ := fs.ReadFile(uiFiles, "ui/vendor/chart.umd.min.js"); !strings.Contains(string(js), "Chart.js v4.6.1") {
		t.Error("vendored Chart.js is not v4.6.1 as the README says")
	}
}

// TestUIRoutes: the router's pages get index.html, files are files, and
// a missing file is a 404.
func TestUIRoutes(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t)})
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"", `<div id="root">`, 200},
		{"apps/cardano/query?q=%7B%7D", `<div id="root">`, 200},
		{"apps/cardano/users/u%2F1", `<div id="root">`, 200},
		{"apps/cardano/sdks", `<div id="root">`, 200},
		{"app.js", "preact-iso", 200},
		{"pages/sdks.js", "sdk-snippets", 200},
		{"apps/cardano/admin", `<div id="root">`, 200},
		{"pages/admin.js", "deleteApp", 200},
		{"pages/admin.js", "setRetention", 200},
		{"vendor/preact.mjs", "createElement", 200},
		{"nope.js", "404", 404},
	} {
		resp, err := ts.client.Get(ts.url + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d, want %d with %q", c.path, resp.StatusCode, c.code, c.want)
		}
		if c.code == 200 && resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", c.path)
		}
	}
}

package server

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// uiFiles are the web UI's static files: plain ES modules (Preact with
// htm components, preact-iso's router), CSS and the vendored libraries
// (ui/vendor, see its README). There is no build step: what is committed
// is what is served.
//
//go:embed ui
var uiFiles embed.FS

// uiHandler serves the UI files at the root. Responses carry a strict
// Content-Security-Policy (same-origin scripts, styles and fetches only)
// and Cache-Control: no-cache, so a new binary's UI is picked up at once
// (the embedded files have no modification times to revalidate against).
// A path of the UI's router that is no file gets index.html.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		if isAppPath(sub, r.URL.Path) {
			// A page of the UI's router (/apps/cardano/query…): the
			// app itself, which routes in the browser.
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		files.ServeHTTP(w, r)
	})
}

// isAppPath reports whether path is one of the UI router's pages rather
// than a file: no file has it, and its last segment has no extension.
func isAppPath(fsys fs.FS, path string) bool {
	p := strings.Trim(path, "/")
	if p == "" || strings.Contains(p[strings.LastIndexByte(p, '/')+1:], ".") {
		return false
	}
	_, err := fs.Stat(fsys, p)
	return err != nil
}

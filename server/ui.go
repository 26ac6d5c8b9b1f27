package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// uiFiles are the web UI's static files: plain ES modules, CSS and the
// vendored Chart.js UMD build (ui/vendor, see its README). There is no
// build step: what is committed is what is served.
//
//go:embed ui
var uiFiles embed.FS

// uiHandler serves the UI files at the root. Responses carry a strict
// Content-Security-Policy (same-origin scripts, styles and fetches only)
// and Cache-Control: no-cache, so a new binary's UI is picked up at once
// (the embedded files have no modification times to revalidate against).
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
		files.ServeHTTP(w, r)
	})
}

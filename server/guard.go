package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
)

// DefaultAllowedHosts returns the Host header values a server listening on
// the given addresses (host:port, as --listen) answers by default
// (docs/ingest.md §4): the listen hosts, "localhost", "127.0.0.1" and "::1",
// with any port. A listen address on all interfaces (":8080", "0.0.0.0",
// "[::]") adds the machine's host name and interface addresses, which is
// what such an address serves. Names are lower-case, IPv6 addresses
// without brackets.
func DefaultAllowedHosts(listen ...string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	for _, l := range listen {
		if l == "" {
			continue
		}
		h, _, err := net.SplitHostPort(l)
		if err != nil {
			h = l
		}
		h = normHost(h)
		if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
			if name, err := os.Hostname(); err == nil {
				hosts = append(hosts, normHost(name))
			}
			if addrs, err := net.InterfaceAddrs(); err == nil {
				for _, a := range addrs {
					if ipn, ok := a.(*net.IPNet); ok {
						hosts = append(hosts, ipn.IP.String())
					}
				}
			}
			continue
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// normHost lower-cases a host and strips IPv6 brackets and a trailing dot.
func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "."))
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// hostPolicy decides which Host header values the server answers: exact
// names, "*.example.com" for the subdomains of example.com, "*" for all.
type hostPolicy struct {
	any      bool
	exact    map[string]bool
	suffixes []string // ".example.com"
}

func newHostPolicy(allowed []string) hostPolicy {
	p := hostPolicy{exact: map[string]bool{}}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		switch {
		case a == "*":
			p.any = true
		case strings.HasPrefix(a, "*."):
			p.suffixes = append(p.suffixes, normHost(a[1:]))
		case a != "":
			h, _, err := net.SplitHostPort(a)
			if err != nil {
				h = a
			}
			p.exact[normHost(h)] = true
		}
	}
	return p
}

// allows reports whether the request's Host (with or without a port) is
// served. An empty Host (HTTP/1.0 without one) is allowed: browsers always
// send one, so it cannot come from DNS rebinding.
func (p hostPolicy) allows(hostport string) bool {
	if p.any || hostport == "" {
		return true
	}
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h = normHost(h)
	if p.exact[h] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(h, s) && len(h) > len(s) {
			return true
		}
	}
	return false
}

// crossSite is a route's policy towards browsers' cross-site requests.
type crossSite uint8

const (
	// sameOriginOnly refuses (403 forbidden) a browser's cross-site
	// request: every endpoint but the events endpoint (docs/ingest.md §4).
	sameOriginOnly crossSite = iota
	// anyOrigin allows every origin and answers CORS preflights, for the
	// events endpoint that browser SDKs call cross-origin (docs/ingest.md §4).
	anyOrigin
)

// corsMaxAge is how long browsers may cache a preflight answer, seconds.
const corsMaxAge = "7200"

// crossSiteRefusal returns why r is a browser's cross-site request that a
// sameOriginOnly route refuses, or "". The rules, after the Fetch Metadata
// resource isolation policy and Go's http.CrossOriginProtection, but for
// every method:
//
//   - an Origin header whose host:port is not the request's Host is
//     refused ("null" included);
//   - else Sec-Fetch-Site "cross-site" is refused, except a top-level
//     navigation by GET or HEAD (a link to the UI from elsewhere, which
//     carries no Origin and cannot read the answer into another site);
//   - requests with neither header (curl, scripts, SDKs) pass.
func crossSiteRefusal(r *http.Request) string {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("cross-origin request refused: Origin %s is not this server (%s)", event.Quote(origin), event.Quote(r.Host))
		}
		return ""
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		nav := r.Header.Get("Sec-Fetch-Mode") == "navigate" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		if !nav {
			return "cross-site request refused (Sec-Fetch-Site: cross-site)"
		}
	}
	return ""
}

// guardRoute applies a route's cross-site policy around h. anyOrigin
// routes get Access-Control-Allow-Origin: * on every answer; their
// preflights are answered by preflight.
func guardRoute(policy crossSite, h http.Handler) http.Handler {
	if policy == anyOrigin {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			h.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := crossSiteRefusal(r); why != "" {
			writeError(w, &apiError{Status: http.StatusForbidden, Code: query.CodeForbidden, Field: "origin", Message: why})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// preflight answers a CORS preflight (OPTIONS) for an anyOrigin route
// whose method is method: any origin, and the request headers the
// preflight asks for (SDKs add their own, such as analytics-next's
// X-Retry-Count on a resend) — these routes take no cookies, and their
// keys travel in headers or bodies the page already holds — else the
// ones the events endpoint needs.
func preflight(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", method+", OPTIONS")
		allow := "Authorization, Content-Type, Content-Encoding"
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" && headerList(req) {
			allow = req
		}
		h.Set("Access-Control-Allow-Headers", allow)
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Max-Age", corsMaxAge)
		h.Set("Allow", method+", OPTIONS")
		w.WriteHeader(http.StatusNoContent)
	}
}

// headerList reports whether s is a comma-separated list of header
// names (RFC 9110 tokens), at most 1 KiB: what a preflight answer may
// echo.
func headerList(s string) bool {
	if len(s) > 1<<10 {
		return false
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return false
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
				return false
			}
		}
	}
	return true
}

// checkHost answers 403 forbidden for a request whose Host hosts does not
// allow (DNS rebinding, docs/ingest.md §4) and reports whether the request may
// go on.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request, hosts hostPolicy) bool {
	if hosts.allows(r.Host) {
		return true
	}
	s.log.Info("request refused: Host not allowed", "host", r.Host, "path", r.URL.Path, "remote", r.RemoteAddr)
	writeError(w, &apiError{Status: http.StatusForbidden, Code: query.CodeForbidden, Field: "host",
		Message: fmt.Sprintf("Host %s is not served here (DNS rebinding protection); add it to --allowed-hosts", event.Quote(r.Host))})
	return false
}

// errBodyTimeout is the read error of a request body not received within
// Config.BodyTimeout.
var errBodyTimeout = errors.New("request body not received in time")

// timedBody is a request body read under the connection's read deadline
// (Config.BodyTimeout from the handler's start). Reaching the end of the
// body clears the deadline, so that a handler that goes on working after
// it (a long query) is not cut off: net/http cancels a request's context
// when a read on its connection fails, including the background read it
// starts once the body is consumed. A timeout keeps the deadline, so that
// net/http's draining of the rest of the body fails at once and the
// connection is closed instead of waiting on a client that trickles.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	expired atomic.Bool // a read hit the deadline
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.rc.SetReadDeadline(time.Time{})
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		b.expired.Store(true)
		err = fmt.Errorf("%w within %s: %w", errBodyTimeout, b.timeout, err)
	}
	return n, err
}

// bodyExpired returns the timeout error when r's body hit
// Config.BodyTimeout, else nil. net/http cancels r.Context() on that read
// failure, so a handler whose work saw only the cancelled context (an
// import reading its body while it imports) asks here before taking the
// client for gone: it answers 408, never an empty 200.
func bodyExpired(r *http.Request) error {
	if b, ok := r.Body.(*timedBody); ok && b.expired.Load() {
		return fmt.Errorf("%w within %s", errBodyTimeout, b.timeout)
	}
	return nil
}

// limitBody sets the read deadline of a request with a body and wraps the
// body to clear it when read. A request without a body is left alone.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) {
	if s.cfg.BodyTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) != nil {
		return // not a net/http connection (a test recorder)
	}
	r.Body = &timedBody{ReadCloser: r.Body, rc: rc, timeout: s.cfg.BodyTimeout}
}

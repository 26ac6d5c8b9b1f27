package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// keyEnv is the environment variable that gives --key its default, so
// that a key need not be on a command line (shell history, ps).
const keyEnv = "SPUR_KEY"

// remote is a running `spur serve` that a CLI command talks to: --url and
// --key (docs/ingest.md §4: every /api/ request carries a key).
type remote struct {
	url    string
	key    string
	base   *url.URL
	client *http.Client
}

// flags registers --url (with usage) and --key.
func (rm *remote) flags(f *pflag.FlagSet, usage string) {
	f.StringVar(&rm.url, "url", "", usage)
	f.StringVar(&rm.key, "key", "", "API key sent to --url (default: $"+keyEnv+")")
}

// open checks --url and takes the key from $SPUR_KEY when --key is not
// given (a server run with --auth none needs none).
func (rm *remote) open() error {
	base, err := url.Parse(strings.TrimSuffix(rm.url, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("--url %q: want http://HOST:PORT", rm.url)
	}
	rm.base = base
	if rm.key == "" {
		rm.key = os.Getenv(keyEnv)
	}
	if rm.client == nil {
		rm.client = &http.Client{}
	}
	return nil
}

// apiError is a docs/analytics.md §9 error answer of the server, with its status.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	msg := fmt.Sprintf("%s (%s)", e.Message, e.Code)
	if e.Code == "unauthenticated" {
		msg += ": give an API key with --key or $" + keyEnv
	}
	return msg
}

// request sends method path (relative to --url, already escaped) with
// body and the key (unless hdr has its own Authorization), and returns the answer's body, at most limit bytes.
// A status other than 2xx is an *apiError.
func (rm *remote) request(ctx context.Context, method, path string, hdr http.Header, body io.Reader, limit int64) ([]byte, error) {
	b, _, err := rm.send(ctx, method, path, hdr, body, limit, nil)
	return b, err
}

// send is request that, with out not nil, copies a 2xx answer's body to
// out as it arrives (any length) and returns the bytes copied instead of
// the body; an error answer is read and returned as by request.
func (rm *remote) send(ctx context.Context, method, path string, hdr http.Header, body io.Reader, limit int64, out io.Writer) ([]byte, int64, error) {
	u := rm.base.JoinPath(path)
	if i := strings.IndexByte(path, '?'); i >= 0 {
		u = rm.base.JoinPath(path[:i])
		u.RawQuery = path[i+1:]
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if rm.key != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+rm.key)
	}
	resp, err := rm.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode/100 == 2 {
		n, err := io.Copy(out, resp.Body)
		if err != nil {
			return nil, n, fmt.Errorf("read the answer: %w", err)
		}
		return nil, n, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		var wrap struct {
			Error *apiError `json:"error"`
		}
		wrap.Error = e
		json.Unmarshal(b, &wrap)
		return nil, 0, e
	}
	return b, int64(len(b)), nil
}

// requestJSON is request with a JSON body (in, when not nil) and a JSON
// answer decoded into out (when not nil).
func (rm *remote) requestJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	hdr := http.Header{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = strings.NewReader(string(b))
		hdr.Set("Content-Type", "application/json")
	}
	b, err := rm.request(ctx, method, path, hdr, body, 16<<20)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("unreadable answer: %w", err)
		}
	}
	return nil
}

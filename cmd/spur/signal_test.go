package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildSpur builds the spur binary into a temporary directory and
// returns its path.
func buildSpur(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "spur")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// slowData generates 2 M synthetic events into app g of a new store and
// returns its directory.
func slowData(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(bin, "--data", dir, "gen", "--events", "2000000", "--app", "g", "--no-compact").CombinedOutput(); err != nil {
		t.Fatalf("spur gen: %v\n%s", err, out)
	}
	return dir
}

// slowQuery is an hourly trend of n distinct users series over all the
// events: about 20 ms per series per core on 2 M events on a quiet 2-core
// machine (0.1 s when loaded), with little memory. 60 series keep a query
// running for more than a second either way.
func slowQuery(n int) string {
	var series []string
	for k := range n {
		series = append(series, fmt.Sprintf(`{"event":"$any","math":"users","where":[{"property":"session_id","op":"gte","value":%d}]}`, -k))
	}
	return `{"kind":"trend","range":{"from":"2024-01-01","to":"2024-04-01"},"tz":"Europe/Berlin","interval":"hour","series":[` + strings.Join(series, ",") + `]}`
}

// TestQueryExitsOnSignal: SIGTERM or SIGINT to `spur query` running a
// slow query ends it within a second, with status 1 and a message naming
// the signal.
func TestQueryExitsOnSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and 2 M events")
	}
	bin := buildSpur(t)
	data := slowData(t, bin)
	qf := filepath.Join(t.TempDir(), "q.json")
	if err := os.WriteFile(qf, []byte(slowQuery(60)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin, "--data", data, "query", "--app", "g", "--workers", "1", qf)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		sent := time.Now()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		d := time.Since(sent)
		t.Logf("%v: exited %v after the signal: %v; stderr %q", sig, d, err, stderr.String())
		if cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("%v: exit status %d (%v), want 1; stdout %.300s", sig, cmd.ProcessState.ExitCode(), err, stdout.String())
		}
		if d > time.Second {
			t.Errorf("%v: exited %v after the signal, want within 1 s", sig, d)
		}
		if want := "unavailable: query cancelled: " + sig.String() + " signal received"; !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: stderr %q lacks %q", sig, stderr.String(), want)
		}
	}
}

// TestServeShutdownWithRunningQueries: SIGTERM to `spur serve` with 16
// slow queries running exits within --shutdown-timeout; the queries are
// cancelled and answered 503 unavailable with Retry-After.
func TestServeShutdownWithRunningQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and 2 M events")
	}
	bin := buildSpur(t)
	data := slowData(t, bin)
	const shutdown = 3 * time.Second
	cmd := exec.Command(bin, "--data", data, "serve", "--listen", "127.0.0.1:0", "--debug-listen", "", "--auth", "none",
		"--workers", "1", "--query-memory", "256MiB", "--query-memory-total", "4GiB", "--shutdown-timeout", shutdown.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read the listen address: %v (stderr %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	_, url, ok := strings.Cut(line, "http://")
	if !ok {
		t.Fatalf("no address in %q", line)
	}
	url = "http://" + strings.Fields(url)[0]
	type answer struct {
		status int
		retry  string
		code   string
		err    error
	}
	answers := make(chan answer, 16)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 16 {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, "POST", url+"api/apps/g/query", strings.NewReader(slowQuery(60)))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var body struct{ Error struct{ Code string } }
			json.NewDecoder(resp.Body).Decode(&body)
			answers <- answer{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), code: body.Error.Code}
		})
	}
	time.Sleep(time.Second) // the 16 queries need about 10 s together on a quiet 2-core machine
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	d := time.Since(sent)
	wg.Wait()
	close(answers)
	t.Logf("serve exited %v after SIGTERM (--shutdown-timeout %v): %v", d, shutdown, err)
	// The queries are cancelled at the timeout; the store's close and
	// the process's exit follow, which a loaded machine (CI running other
	// packages' tests beside) delays by a fraction of a second (3.19 s
	// seen once): a second's slack, far below the 10 s the queries need.
	if err != nil || d > shutdown+time.Second {
		t.Errorf("serve exited after %v with %v (stderr %s)", d, err, stderr.String())
	}
	cancelled := 0
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("query: %v", a.err)
		case a.status == http.StatusServiceUnavailable && a.code == "unavailable" && a.retry != "":
			cancelled++
		case a.status != http.StatusOK:
			t.Errorf("query: status %d code %q", a.status, a.code)
		}
	}
	if cancelled == 0 {
		t.Error("no query was running at SIGTERM: the test proves nothing")
	}
	t.Logf("%d of 16 queries cancelled with 503", cancelled)
}

// TestExitAfterInterrupt: a command still running the grace after its
// signal context ends is ended with status 1; one that returns in time is
// not.
func TestExitAfterInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	codes := make(chan int, 1)
	var stderr syncBuffer
	disarm := exitAfterInterrupt(ctx, 20*time.Millisecond, &stderr, func(code int) { codes <- code })
	cancel()
	select {
	case c := <-codes:
		if c != 1 || !strings.Contains(stderr.String(), "exiting") {
			t.Errorf("exit(%d), stderr %q", c, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit after the grace")
	}
	disarm()
	ctx, cancel = context.WithCancel(context.Background())
	disarm = exitAfterInterrupt(ctx, 20*time.Millisecond, &stderr, func(code int) { codes <- code })
	cancel()
	disarm()
	select {
	case c := <-codes:
		t.Errorf("exit(%d) after the command returned", c)
	case <-time.After(50 * time.Millisecond):
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

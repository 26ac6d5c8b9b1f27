// Command soak runs query clients and an import client against `spur
// serve` for a while and reports what an operator wants to know before
// leaving a server unattended: latency percentiles per query, errors, the
// server's peak RSS, and its goroutines before and after the load (a leak
// shows as a higher count after). Not run in CI.
//
//	go run ./bench/soak -minutes 10                 # builds spur, generates 2M events
//	go run ./bench/soak -spur /tmp/spur -data DIR -app bench -minutes 1
//
// Without -data it builds a fresh store with `spur gen` into a temporary
// directory (removed afterwards). The queries are bench/queries/*.json
// (their app set to -app) plus one that draws warnings; each client runs
// them in turn, a new request as soon as the last one answered. The
// import client posts a batch of -import-rows generated events every
// -import-every, alternately as CSV and gzipped CSV, into the same app, so
// queries run while new segments are published and compacted. Then it
// sends SIGTERM and reports how long the server took to exit.
//
// Exit status 1 when any request failed or the goroutine count after the
// load exceeds the count before by more than -goroutine-slack.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type config struct {
	spur, data, app, queries, log string
	events                        int
	minutes                       float64
	clients                       int
	importEvery                   time.Duration
	importRows                    int
	slack                         int
}

func main() {
	var c config
	flag.StringVar(&c.spur, "spur", "", "spur binary (default: go build ./cmd/spur into a temporary directory)")
	flag.StringVar(&c.data, "data", "", "store directory (default: a temporary one filled by spur gen)")
	flag.StringVar(&c.app, "app", "soak", "app to query and import into")
	flag.StringVar(&c.queries, "queries", "bench/queries", "directory of query JSON files")
	flag.StringVar(&c.log, "log", "", "file for the server's output (default: serve.log in the temporary directory, removed at the end)")
	flag.IntVar(&c.events, "events", 2_000_000, "events spur gen makes when -data is not given")
	flag.Float64Var(&c.minutes, "minutes", 10, "how long the load runs")
	flag.IntVar(&c.clients, "clients", 8, "concurrent query clients")
	flag.DurationVar(&c.importEvery, "import-every", 5*time.Second, "pause between imports")
	flag.IntVar(&c.importRows, "import-rows", 20_000, "events per import")
	flag.IntVar(&c.slack, "goroutine-slack", 2, "goroutines after the load may exceed those before by this many")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("soak: ")
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

func run(c config) error {
	tmp, err := os.MkdirTemp("", "spur-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if c.spur == "" {
		c.spur = filepath.Join(tmp, "spur")
		log.Printf("building %s", c.spur)
		if out, err := exec.Command("go", "build", "-o", c.spur, "./cmd/spur").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if c.data == "" {
		c.data = filepath.Join(tmp, "data")
		log.Printf("generating %d events into app %q", c.events, c.app)
		if out, err := exec.Command(c.spur, "--data", c.data, "gen", "--events", strconv.Itoa(c.events), "--app", c.app).CombinedOutput(); err != nil {
			return fmt.Errorf("spur gen: %v\n%s", err, out)
		}
	}
	queries, err := loadQueries(c.queries, c.app)
	if err != nil {
		return err
	}
	addr, daddr := freeAddr(), freeAddr()
	srv := exec.Command(c.spur, "--data", c.data, "--log-level", "warn", "serve", "--listen", addr, "--debug-listen", daddr, "--auth", "none") // loopback: no keys needed
	logPath := filepath.Join(tmp, "serve.log")
	if c.log != "" {
		logPath = c.log
	}
	serveLog, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer serveLog.Close()
	srv.Stdout, srv.Stderr = serveLog, serveLog
	if err := srv.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	defer srv.Process.Kill()
	base, dbase := "http://"+addr+"/", "http://"+daddr+"/"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.clients + 2}}
	if err := waitReady(client, base+"healthz", exited); err != nil {
		return err
	}
	// One pass over the queries first: caches warm, and a query that
	// fails at once fails the run before ten minutes are spent.
	for _, q := range queries {
		if _, err := post(client, base+"api/apps/"+c.app+"/query", "application/json", q.body); err != nil {
			return fmt.Errorf("warm-up %s: %w", q.name, err)
		}
	}
	client.CloseIdleConnections()
	time.Sleep(time.Second)
	gBefore, err := goroutines(client, dbase)
	if err != nil {
		return err
	}
	rss := &rssSampler{pid: srv.Process.Pid}
	rss.sample()

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.minutes*float64(time.Minute)))
	defer cancel()
	rec := newRecorder()
	var wg sync.WaitGroup
	start := time.Now()
	log.Printf("load: %d query clients + imports for %.1f min against %s (pid %d)", c.clients, c.minutes, base, srv.Process.Pid)
	for i := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; ctx.Err() == nil; k++ {
				q := queries[k%len(queries)]
				t0 := time.Now()
				_, err := post(client, base+"api/apps/"+c.app+"/query", "application/json", q.body)
				if ctx.Err() != nil && err != nil {
					return // cut off by the end of the run
				}
				rec.add(q.name, time.Since(t0), err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		for n := 0; ctx.Err() == nil; n++ {
			body, name := importBatch(rng, c.importRows, n%2 == 1)
			t0 := time.Now()
			_, err := post(client, base+"api/apps/"+c.app+"/import?name="+name, "text/csv", body)
			rec.add("import "+name, time.Since(t0), err)
			select {
			case <-ctx.Done():
			case <-time.After(c.importEvery):
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			rss.sample()
		}
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start)
	client.CloseIdleConnections()
	time.Sleep(2 * time.Second) // handlers and connections wind down
	rss.sample()
	gAfter, err := goroutines(client, dbase)
	if err != nil {
		return err
	}
	hwm := rss.hwm()

	t0 := time.Now()
	srv.Process.Signal(syscall.SIGTERM)
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(time.Minute):
		exitErr = errors.New("did not exit within 1 min of SIGTERM")
	}
	shutdown := time.Since(t0)

	errs := rec.report(os.Stdout, elapsed)
	fmt.Printf("\nserver RSS: peak %s (VmHWM %s), at the end %s; sampled every second\n", mib(rss.peak), mib(hwm), mib(rss.last))
	fmt.Printf("goroutines: %d before the load, %d after\n", gBefore, gAfter)
	fmt.Printf("SIGTERM → exit in %s (%v)\n", shutdown.Round(time.Millisecond), exitStatus(exitErr))
	fmt.Printf("server log: %d slow-query warnings, %d errors (%s)\n", countLines(logPath, "msg=\"slow query\""), countLines(logPath, "level=ERROR"), logPath)
	switch {
	case errs > 0:
		return fmt.Errorf("%d requests failed", errs)
	case gAfter > gBefore+c.slack:
		return fmt.Errorf("goroutines grew from %d to %d", gBefore, gAfter)
	case exitErr != nil:
		return fmt.Errorf("server exit: %v", exitErr)
	}
	return nil
}

// countLines counts the lines of the file at path that contain sub.
func countLines(path, sub string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return strings.Count(string(b), sub)
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

type namedQuery struct {
	name string
	body []byte
}

// loadQueries reads the query files of dir with their app set to app,
// plus a query whose unknown event and value draw warnings.
func loadQueries(dir, app string) ([]namedQuery, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no query files in %s (run from the repository root or set -queries): %v", dir, err)
	}
	var out []namedQuery
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var q map[string]any
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		q["app"] = app
		b, _ = json.Marshal(q)
		out = append(out, namedQuery{strings.TrimSuffix(filepath.Base(f), ".json"), b})
	}
	out = append(out, namedQuery{"warnings", []byte(`{"kind":"trend","app":"` + app + `","range":{"from":"2024-01-01 00:00:00+00","to":"2024-03-31"},` +
		`"series":[{"event":"purchse"},{"event":"purchase","where":[{"property":"platform","op":"eq","value":"iOS"}]}]}`)})
	return out, nil
}

// importBatch returns n generated events as CSV (gzipped when zip) and the
// input name that tells the server the format.
func importBatch(rng *rand.Rand, n int, zip bool) ([]byte, string) {
	events := []string{"view_item", "add_to_cart", "begin_checkout", "purchase", "app_open", "search"}
	platforms := []string{"ios", "android", "web"}
	var b bytes.Buffer
	b.WriteString("user_id,timestamp,event,price,platform\n")
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for range n {
		ts := time.Unix(start+rng.Int64N(90*86400), rng.Int64N(1e9)).UTC()
		fmt.Fprintf(&b, "live%d,%s,%s,%.2f,%s\n", rng.IntN(50_000), ts.Format("2006-01-02 15:04:05.000-07"),
			events[rng.IntN(len(events))], rng.Float64()*100, platforms[rng.IntN(len(platforms))])
	}
	if !zip {
		return b.Bytes(), "batch.csv"
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b.Bytes())
	w.Close()
	return z.Bytes(), "batch.csv.gz"
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(client *http.Client, url string, exited <-chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("spur serve exited: %v", err)
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("spur serve not ready after 30 s")
}

// post sends body and returns the answer, or an error for a transport
// failure or a status other than 200 (with the docs/analytics.md §9 error body).
func post(client *http.Client, url, ctype string, body []byte) ([]byte, error) {
	resp, err := client.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// goroutines reads the server's goroutine count from its debug listener.
func goroutines(client *http.Client, dbase string) (int, error) {
	resp, err := client.Get(dbase + "debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("unexpected goroutine profile header %q", line)
	}
	return strconv.Atoi(n)
}

// rssSampler samples a process's resident set size from /proc.
type rssSampler struct {
	pid        int
	peak, last int64
}

func (r *rssSampler) field(name string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (r *rssSampler) sample() {
	r.last = r.field("VmRSS")
	r.peak = max(r.peak, r.last)
}

// hwm is the kernel's own peak RSS of the process (VmHWM), which catches
// peaks between samples.
func (r *rssSampler) hwm() int64 { return r.field("VmHWM") }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// recorder collects latencies and errors per request name.
type recorder struct {
	mu   sync.Mutex
	lat  map[string][]time.Duration
	errs map[string][]string
}

func newRecorder() *recorder {
	return &recorder{lat: map[string][]time.Duration{}, errs: map[string][]string{}}
}

func (r *recorder) add(name string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs[name] = append(r.errs[name], err.Error())
		return
	}
	r.lat[name] = append(r.lat[name], d)
}

// report prints one row per request name and returns the number of errors.
func (r *recorder) report(w io.Writer, elapsed time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.lat))
	for n := range r.lat {
		names = append(names, n)
	}
	for n := range r.errs {
		if _, ok := r.lat[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	fmt.Fprintf(w, "%-32s %8s %8s %10s %10s %10s\n", "request", "ok", "errors", "p50", "p99", "max")
	var all []time.Duration
	total, errs := 0, 0
	for _, n := range names {
		l := r.lat[n]
		slices.Sort(l)
		all = append(all, l...)
		total += len(l)
		errs += len(r.errs[n])
		fmt.Fprintf(w, "%-32s %8d %8d %10s %10s %10s\n", n, len(l), len(r.errs[n]), pct(l, 50), pct(l, 99), pct(l, 100))
	}
	slices.Sort(all)
	fmt.Fprintf(w, "%-32s %8d %8d %10s %10s %10s\n", "all", total, errs, pct(all, 50), pct(all, 99), pct(all, 100))
	fmt.Fprintf(w, "%.1f requests/s over %s\n", float64(total)/elapsed.Seconds(), elapsed.Round(time.Second))
	for _, n := range names {
		for i, e := range r.errs[n] {
			if i == 3 {
				fmt.Fprintf(w, "  %s: … %d more\n", n, len(r.errs[n])-3)
				break
			}
			fmt.Fprintf(w, "  %s: %.300s\n", n, e)
		}
	}
	return errs
}

// pct returns the p-th percentile (nearest rank) of sorted durations.
func pct(sorted []time.Duration, p int) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := max((p*len(sorted)+99)/100-1, 0)
	return sorted[i].Round(100 * time.Microsecond).String()
}

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
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spurdb/spur/storage"
)

// startServe runs `spur serve` on data in this process (its own flock on
// the store, as another process would hold it) and returns its base URL,
// the admin key of its login URL (on a store without one) and a stop
// function that waits for it to exit.
func startServe(t *testing.T, data string) (string, string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root, _ := newRoot(pw, io.Discard)
	root.SetArgs([]string{"--data", data, "--log-level", "error", "serve", "--listen", "127.0.0.1:0", "--debug-listen", ""})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	sc := bufio.NewScanner(pr)
	re := regexp.MustCompile(`on (http://[^/ ]+)/`)
	keyRE := regexp.MustCompile(`^    http://[^/ ]+/#key=(spur_[a-z2-7]{32})$`)
	var url, key string
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil && url == "" {
			url = m[1]
		}
		if m := keyRE.FindStringSubmatch(sc.Text()); m != nil {
			key = m[1]
		}
		if l := sc.Text(); strings.Contains(l, "create more keys") || strings.Contains(l, "needs a key") || strings.Contains(l, "NO AUTHENTICATION") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		cancel()
		t.Fatalf("serve did not start: %v", <-done)
	}
	return url, key, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// writeViewBatch writes dir/bK.csv, 50 "view" events (columns user_id,
// ts, event) of the users u((first+i) mod 37) on 2021-05-0(1+k mod 9),
// and returns its path.
func writeViewBatch(t *testing.T, dir string, k, first int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("user_id,ts,event\n")
	for i := range 50 {
		fmt.Fprintf(&b, "u%d,2021-05-0%dT10:%02d:00Z,view\n", (first+i)%37, 1+k%9, i)
	}
	p := filepath.Join(dir, fmt.Sprintf("b%d.csv", k))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeAndCLIWrites: while spur serve runs, a CLI import into its
// store is refused naming the server (docs/storage.md §4), the same import
// through --url is applied, and four clients querying the server during
// a loop of such imports always get an answer some published version
// gives (never an error, never a count that decreases); the CLI's own
// reader (spur query) sees the server's publications without a restart.
func TestServeAndCLIWrites(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	batch := func(k int) string { return writeViewBatch(t, dir, k, k*50) }
	if _, stderr, err := spur(t, "", "--data", data, "import", "--app", "shop", "--time", "ts", batch(0)); err != nil {
		t.Fatalf("first import: %v\n%s", err, stderr)
	}
	url, key, stop := startServe(t, data)
	defer stop()

	_, _, err := spur(t, "", "--data", data, "import", "--app", "shop", "--time", "ts", batch(1))
	if err == nil || !regexp.MustCompile(`app "shop" is being written by spur serve \(pid \d+\): send imports to its API`).MatchString(err.Error()) {
		t.Fatalf("a CLI import while serve runs: %v", err)
	}
	if _, _, err := spur(t, "", "--data", data, "compact", "--app", "shop", "--force"); err == nil || !strings.Contains(err.Error(), "spur serve (pid") {
		t.Fatalf("a CLI compaction while serve runs: %v", err)
	}

	count := func() (int64, error) {
		body := `{"kind":"trend","range":{"from":"2021-05-01","to":"2021-06-01"},"interval":"month","series":[{"event":"view"}]}`
		req, _ := http.NewRequest("POST", url+"/api/apps/shop/query", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		var res struct {
			Series []struct {
				Total float64 `json:"total"`
			} `json:"series"`
		}
		if err := json.Unmarshal(b, &res); err != nil || len(res.Series) != 1 {
			return 0, fmt.Errorf("answer %s: %v", b, err)
		}
		return int64(res.Series[0].Total), nil
	}
	queries := int64(10_000)
	if raceEnabled || testing.Short() {
		queries = 1_000
	}
	var n, bad atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for n.Load() < queries {
				got, err := count()
				n.Add(1)
				if err != nil || got < last || got%50 != 0 || got < 50 {
					bad.Add(1)
					t.Errorf("client %d: %d events (last %d), %v", w, got, last, err)
					return
				}
				last = got
			}
		}()
	}
	imports := 1
	for n.Load() < queries && imports < 400 {
		var out bytes.Buffer
		root, _ := newRoot(&out, &out)
		root.SetArgs([]string{"--data", data, "import", "--app", "shop", "--time", "ts", "--url", url, "--key", key, batch(imports)})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("import %d through the server: %v\n%s", imports, err, out.String())
		}
		imports++
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d queries during %d imports through the server: %d failed or wrong", n.Load(), imports-1, bad.Load())
	want := int64(imports) * 50
	if got, err := count(); err != nil || got != want {
		t.Fatalf("after the imports the server counts %d (%v), want %d", got, err, want)
	}
	// A reading process (the CLI) sees what the server published.
	q := `{"kind":"trend","range":{"from":"2021-05-01","to":"2021-06-01"},"interval":"month","series":[{"event":"view"}]}`
	out, stderr, err := spur(t, q, "--data", data, "query", "--app", "shop", "-")
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"total": %d`, want)) {
		t.Fatalf("spur query after the server's imports: %v\n%s%s", err, out, stderr)
	}
}

// TestServeImportCompacts: an import through --url leaves one run of
// events per shard, as a local spur import does (the server compacts
// shards of more than one run after publishing); with --no-compact the
// request carries no_compact=true and the server leaves the runs.
func TestServeImportCompacts(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "store")
	batch := func(k int) string { return writeViewBatch(t, dir, k, 0) }
	url, key, stop := startServe(t, data)
	defer stop()
	maxRuns := func() int {
		st, err := storage.Open(storage.Config{Dir: data, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		a, err := st.App("shop")
		if err != nil {
			t.Fatal(err)
		}
		ranks := map[int]map[int64]bool{}
		for _, ref := range a.Current().Segments {
			if ref.Kind == storage.KindEvents {
				if ranks[ref.Shard] == nil {
					ranks[ref.Shard] = map[int64]bool{}
				}
				ranks[ref.Shard][ref.SeqMax] = true
			}
		}
		n := 0
		for _, r := range ranks {
			n = max(n, len(r))
		}
		return n
	}
	for k := range 3 {
		if _, stderr, err := spur(t, "", "import", "--app", "shop", "--time", "ts", "--url", url, "--key", key, "--no-compact", batch(k)); err != nil {
			t.Fatalf("import %d --no-compact through the server: %v\n%s", k, err, stderr)
		}
	}
	if n := maxRuns(); n != 3 {
		t.Fatalf("after 3 imports with --no-compact through the server: at most %d runs per shard, want 3", n)
	}
	if _, stderr, err := spur(t, "", "import", "--app", "shop", "--time", "ts", "--url", url, "--key", key, batch(3)); err != nil {
		t.Fatalf("import through the server: %v\n%s", err, stderr)
	}
	if n := maxRuns(); n != 1 {
		t.Fatalf("after an import through the server: at most %d runs per shard, want 1", n)
	}
}

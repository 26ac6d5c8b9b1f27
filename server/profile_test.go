package server

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/exp/trace"
)

// fetch GETs url with client and returns the body (status 200 required).
func fetch(t *testing.T, client *http.Client, url string) []byte {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("GET %s: %d %v: %.200s", url, resp.StatusCode, err, b)
		return nil
	}
	return b
}

// TestProfileAndTraceOfRunningQueries takes a CPU profile and an execution
// trace from the debug listener while queries and events requests run,
// then finds their runtime/trace tasks and stage regions in the trace, and
// the app and kind pprof labels in the profile.
func TestProfileAndTraceOfRunningQueries(t *testing.T) {
	ts := start(t, Config{Store: openCardano(t), Ingester: nopIngester{}})
	stop := make(chan struct{})
	var load sync.WaitGroup
	for i := range 3 {
		path, body := "api/apps/cardano/query", funnelQuery
		if i == 2 { // and events requests
			path, body = "api/apps/cardano/events", `[{"user_id": "u", "event": "e", "properties": {"n": 1}}]`
		}
		load.Add(1)
		go func() {
			defer load.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := ts.client.Post(ts.url+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	var prof, tr []byte
	var grab sync.WaitGroup
	grab.Add(2)
	go func() { defer grab.Done(); prof = fetch(t, ts.client, ts.debugURL+"debug/pprof/profile?seconds=1") }()
	go func() { defer grab.Done(); tr = fetch(t, ts.client, ts.debugURL+"debug/pprof/trace?seconds=1") }()
	grab.Wait()
	close(stop)
	load.Wait()
	if t.Failed() {
		return
	}

	// The trace: tasks spur.request ⊃ spur.query, with their regions.
	r, err := trace.NewReader(bytes.NewReader(tr))
	if err != nil {
		t.Fatal(err)
	}
	taskType := map[trace.TaskID]string{}
	regions := map[string]map[string]int{} // task type → region type → count
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind() {
		case trace.EventTaskBegin:
			tk := ev.Task()
			taskType[tk.ID] = tk.Type
		case trace.EventRegionBegin:
			rg := ev.Region()
			tt := taskType[rg.Task]
			if regions[tt] == nil {
				regions[tt] = map[string]int{}
			}
			regions[tt][rg.Type]++
		}
	}
	for task, want := range map[string][]string{
		"spur.request": {"read body", "parse", "run", "encode"},
		"spur.query":   {"plan", "scan", "scan shard"},
		"spur.ingest":  {"parse", "store"},
	} {
		for _, rg := range want {
			if regions[task][rg] == 0 {
				t.Errorf("trace: no region %q in a %q task (regions by task: %v)", rg, task, regions)
			}
		}
	}

	// The CPU profile: samples labelled with the app and the query kind.
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to read the profile: %v", err)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if err := os.WriteFile(path, prof, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gotool, "tool", "pprof", "-tags", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -tags: %v\n%s", err, out)
	}
	for _, want := range []string{"app:", "cardano", "kind:", "funnel"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("CPU profile tags lack %q:\n%s", want, out)
		}
	}
}

// Command throughput measures how many events per second a running `spur serve` stores through
// each SDK protocol's endpoint and through the native events endpoint, at the same batch size.
//
// It builds every request body first (as posthog-python, segment-python, amplitude-analytics and
// mixpanel send them), then posts them from -workers goroutines and times the posts
// from the first to the last acknowledgement; each protocol writes to an app of its own, and the
// stored count is checked exactly at the end. It talks HTTP only (serve --auth none on loopback).
//
//	go run ./throughput -url http://127.0.0.1:8080 -events 100000 -batch 1000
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// body is one prepared request: its path, headers and bytes.
type body struct {
	path    string
	headers map[string]string
	data    []byte
}

// protocol renders the events [from, to) of app into one request.
type protocol struct {
	name   string
	render func(app string, from, to int) body
}

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func ts(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }

func props(i int) map[string]any {
	return map[string]any{"plan": []string{"free", "pro", "team"}[i%3], "n": i, "path": fmt.Sprintf("/p/%d", i%50)}
}

func user(i int) string { return fmt.Sprintf("user-%d", i%5000) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var protocols = []protocol{
	{"native", func(app string, from, to int) body {
		var evs []map[string]any
		for i := from; i < to; i++ {
			evs = append(evs, map[string]any{"user_id": user(i), "event": "tp", "timestamp": ts(i).Format(time.RFC3339Nano),
				"insert_id": fmt.Sprintf("n-%d", i), "properties": props(i)})
		}
		return body{"/api/apps/" + app + "/events", map[string]string{"Content-Type": "application/json"}, mustJSON(evs)}
	}},
	{"posthog", func(app string, from, to int) body {
		var evs []map[string]any
		for i := from; i < to; i++ {
			p := props(i)
			p["$lib"], p["$lib_version"], p["$geoip_disable"] = "posthog-python", "7.91.1", true
			evs = append(evs, map[string]any{"event": "tp", "distinct_id": user(i), "uuid": uuidOf(i),
				"timestamp": ts(i).Format("2006-01-02T15:04:05.000000-07:00"), "properties": p})
		}
		return body{"/ingest/posthog/batch/", map[string]string{"Content-Type": "application/json"},
			mustJSON(map[string]any{"api_key": app, "batch": evs, "historical_migration": false,
				"sent_at": time.Now().UTC().Format(time.RFC3339Nano)})}
	}},
	{"segment", func(app string, from, to int) body {
		var msgs []map[string]any
		for i := from; i < to; i++ {
			msgs = append(msgs, map[string]any{"type": "track", "event": "tp", "userId": user(i), "anonymousId": nil,
				"properties": props(i), "timestamp": ts(i).Format("2006-01-02T15:04:05.000-07:00"),
				"messageId": fmt.Sprintf("s-%d", i), "integrations": map[string]any{},
				"context": map[string]any{"library": map[string]any{"name": "analytics-python", "version": "2.4.0"}}})
		}
		return body{"/ingest/segment/v1/batch", map[string]string{"Content-Type": "application/json",
			"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(app+":"))},
			mustJSON(map[string]any{"batch": msgs, "sentAt": time.Now().UTC().Format(time.RFC3339Nano), "writeKey": app})}
	}},
	{"amplitude", func(app string, from, to int) body {
		var evs []map[string]any
		for i := from; i < to; i++ {
			evs = append(evs, map[string]any{"event_type": "tp", "user_id": user(i), "time": ts(i).UnixMilli(),
				"insert_id": fmt.Sprintf("a-%d", i), "event_properties": props(i), "library": "amplitude-python/1.3.0"})
		}
		return body{"/ingest/amplitude/2/httpapi", map[string]string{"Content-Type": "application/json; charset=UTF-8"},
			mustJSON(map[string]any{"api_key": app, "events": evs, "options": map[string]any{"min_id_length": 1}})}
	}},
	{"mixpanel", func(app string, from, to int) body {
		var evs []map[string]any
		for i := from; i < to; i++ {
			p := props(i)
			p["token"], p["distinct_id"], p["time"], p["$insert_id"], p["mp_lib"] = app, user(i),
				float64(ts(i).UnixMilli())/1000, fmt.Sprintf("m-%d", i), "python"
			evs = append(evs, map[string]any{"event": "tp", "properties": p})
		}
		form := url.Values{"data": {string(mustJSON(evs))}, "verbose": {"1"}, "ip": {"0"}}
		return body{"/ingest/mixpanel/track", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			[]byte(form.Encode())}
	}},
}

func uuidOf(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "base URL of spur serve --auth none")
	events := flag.Int("events", 100000, "events per protocol")
	batch := flag.Int("batch", 1000, "events per request")
	workers := flag.Int("workers", 2, "requests in flight at once")
	only := flag.String("protocols", "native,posthog,segment,amplitude,mixpanel", "protocols to measure, comma-separated")
	run := flag.String("run", fmt.Sprint(time.Now().Unix()), "suffix of the apps' names (tp-PROTOCOL-RUN)")
	flag.Parse()
	failed := false
	fmt.Printf("%-10s %8s %6s %8s %10s %9s\n", "protocol", "events", "batch", "seconds", "events/s", "MB/s sent")
	for _, p := range protocols {
		if !strings.Contains(","+*only+",", ","+p.name+",") {
			continue
		}
		app := "tp-" + p.name + "-" + *run
		secs, sent, err := measure(*base, app, p, *events, *batch, *workers)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", p.name, err)
			failed = true
			continue
		}
		fmt.Printf("%-10s %8d %6d %8.2f %10.0f %9.1f\n", p.name, *events, *batch, secs, float64(*events)/secs,
			float64(sent)/secs/1e6)
	}
	if failed {
		os.Exit(1)
	}
}

// measure posts the protocol's n events in batches and returns the seconds taken and bytes sent,
// after checking that the app stores exactly n events.
func measure(base, app string, p protocol, n, batch, workers int) (float64, int, error) {
	var bodies []body
	sent := 0
	for from := 0; from < n; from += batch {
		b := p.render(app, from, min(from+batch, n))
		bodies = append(bodies, b)
		sent += len(b.data)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 2 * time.Minute}
	jobs := make(chan body)
	errs := make(chan error, len(bodies))
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range jobs {
				if err := postOnce(client, base, b); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, b := range bodies {
		jobs <- b
	}
	close(jobs)
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(errs)
	for err := range errs {
		return 0, 0, err
	}
	got, err := count(client, base, app)
	if err != nil {
		return 0, 0, err
	}
	if got != n {
		return 0, 0, fmt.Errorf("app %s stores %d events, want %d", app, got, n)
	}
	return secs, sent, nil
}

// postOnce posts b, retrying (at most 20 times) a 503 after its Retry-After, as the SDKs do.
func postOnce(client *http.Client, base string, b body) error {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequest("POST", base+b.path, bytes.NewReader(b.data))
		if err != nil {
			return err
		}
		for k, v := range b.headers {
			req.Header.Set(k, v)
		}
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("POST %s: %w", b.path, err)
		}
		out, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == 200 {
			return nil
		}
		if res.StatusCode != 503 || attempt == 20 {
			return fmt.Errorf("POST %s: %d %s", b.path, res.StatusCode, out)
		}
		time.Sleep(time.Second)
	}
}

// count is the number of events of app (a trend of "$any" over its whole data).
func count(client *http.Client, base, app string) (int, error) {
	q := mustJSON(map[string]any{"kind": "trend", "interval": "month", "series": []map[string]string{{"event": "$any"}}})
	res, err := client.Post(base+"/api/apps/"+app+"/query", "application/json", bytes.NewReader(q))
	if err != nil {
		return 0, fmt.Errorf("query of %s: %w", app, err)
	}
	defer res.Body.Close()
	var r struct {
		Series []struct {
			Total float64 `json:"total"`
		} `json:"series"`
	}
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Series) != 1 {
		return 0, fmt.Errorf("query of %s: %d %s", app, res.StatusCode, raw)
	}
	return int(r.Series[0].Total), nil
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/spf13/cobra"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/internal/cputime"
)

// loadgenConfig are the flags of `spur loadgen`.
type loadgenConfig struct {
	remote        remote
	identifyEvery int  // every Nth event an $identify (0: none)
	anonymousID   bool // every event with anonymous_id
	app           string
	rate          float64
	duration      time.Duration
	events        int64
	batch         int
	gzip          bool
	workers       int
	users         int64
	seed          int64
	timeMode      string
	record        string
	check         string
	retryTimeout  time.Duration
	report        time.Duration
	serverMetric  string
	protocol      string
	sdk           sdkEncoder // --protocol other than native
}

func newLoadgenCmd(g *globals) *cobra.Command {
	c := &loadgenConfig{}
	cmd := &cobra.Command{
		Use:   "loadgen --url URL --key KEY --app APP [--rate N] [--duration D] [--batch 1000] [--gzip] [--workers N]",
		Short: "Send generated events to a running spur serve and report accepted events/s and ack latency",
		Long: `Loadgen sends realistic events (spur gen's shape: sessions, a funnel, five
or six properties, user properties on installs) to the events endpoint of a
running spur serve, in batches of --batch events as NDJSON (gzip with
--gzip), from --workers goroutines, at --rate events/s in total (0: as fast
as the server answers) for --duration or until --events are acknowledged.

Each event has an insert_id and a timestamp fixed when its batch is made
(--time now: the batch's send time, µs apart; --time gen: the generator's
2024 times, a back-fill). A batch that is not acknowledged (connection
refused or reset, 5xx, 503 with Retry-After) is retried unchanged until
it is, or for --retry-timeout; a 4xx answer ends the run.

It reports, every --report and at the end, accepted events/s, rejected
events, retries, and the ack latency percentiles p50/p99/p99.9 of the
acknowledged requests; with --server-metrics (the debug listener's
/metrics) also the server's CPU next to its own.

--record FILE writes what was acknowledged: per user the count of events and
a checksum (the sum of FNV-1a 64 of "event|time µs|insert_id"), and the
users of batches never acknowledged. --check FILE compares such a record with
what the server holds (GET /api/apps/APP/users/ID/events, a query --key):
every acknowledged event present exactly once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.remote.open(); err != nil {
				return err
			}
			if !slices.Contains(loadProtocols, c.protocol) {
				return fmt.Errorf("--protocol %s: want one of %s", c.protocol, strings.Join(loadProtocols, ", "))
			}
			if c.protocol != "native" {
				key := c.remote.key
				if key == "" {
					key = c.app // --auth none: the key names the app
				}
				c.sdk = sdkEncoder{proto: c.protocol, key: key}
				if c.anonymousID && c.protocol == "posthog" {
					return errors.New("--anonymous-id with --protocol posthog: PostHog events carry no anonymous id (use --identify-every)")
				}
			}
			if c.check != "" {
				return runLoadCheck(cmd, c)
			}
			return runLoadgen(cmd, c)
		},
	}
	f := cmd.Flags()
	c.remote.flags(f, "base URL of the spur serve to load (required)")
	f.StringVar(&c.app, "app", "loadgen", "app to send the events to")
	f.Float64Var(&c.rate, "rate", 0, "events per second in total; 0: as fast as acknowledged")
	f.DurationVar(&c.duration, "duration", 30*time.Second, "how long to send new batches; 0: until --events")
	f.Int64Var(&c.events, "events", 0, "stop after this many events were sent; 0: no limit")
	f.IntVar(&c.batch, "batch", 1000, "events per request")
	f.BoolVar(&c.gzip, "gzip", false, "gzip the request bodies (Content-Encoding: gzip)")
	f.IntVar(&c.workers, "workers", 8, "goroutines sending batches")
	f.Int64Var(&c.users, "users", 100_000, "users in all (split among the workers)")
	f.Int64Var(&c.seed, "seed", 0, "seed of the events and insert ids; 0: from the clock")
	f.StringVar(&c.timeMode, "time", "now", "event timestamps: now (the batch's send time) or gen (the generator's 2024 times)")
	f.StringVar(&c.record, "record", "", "write what was acknowledged (per user: events and checksum) to this JSON file")
	f.StringVar(&c.check, "check", "", "compare the record in this file with the server's events, instead of sending")
	f.DurationVar(&c.retryTimeout, "retry-timeout", 10*time.Minute, "give up a batch not acknowledged for this long")
	f.DurationVar(&c.report, "report", 5*time.Second, "interval of the progress lines on stderr")
	f.StringVar(&c.serverMetric, "server-metrics", "", "the server's Prometheus metrics URL (its debug listener's /metrics) to report its CPU time")
	f.IntVar(&c.identifyEvery, "identify-every", 0, "make every Nth event an $identify of its user with the user's anonymous id (anon-USER; docs/identity.md); 0: none")
	f.BoolVar(&c.anonymousID, "anonymous-id", false, "send every event with the user's anonymous id (anon-USER) as anonymous_id: an identify on every event, as Segment and Amplitude send")
	f.StringVar(&c.protocol, "protocol", "native", "send as this SDK protocol to its capture path (docs/sdks.md): native (the events endpoint), posthog, segment, amplitude or mixpanel; the key goes where the SDK puts it (--key, or the app's name under --auth none)")
	cmd.MarkFlagRequired("url")
	return cmd
}

// userTally is what a user's acknowledged events add up to: their count
// and the sum (mod 2^64) of their events' hashes.
type userTally struct {
	Events int64  `json:"events"`
	Sum    uint64 `json:"sum"`
	// Identified: an acknowledged event of the user joined its anonymous
	// id (--identify-every, --anonymous-id): --check asks that the person
	// of anon-USER is USER.
	Identified bool `json:"identified,omitempty"`
}

// loadRecord is the --record file.
type loadRecord struct {
	App string `json:"app"`
	// Acked counts the acknowledged and accepted events; Users tallies
	// them per user.
	Acked int64                 `json:"acked"`
	Users map[string]*userTally `json:"users"`
	// Unacked tallies the events of batches given up (which may or may
	// not be stored), per user.
	Unacked map[string]*userTally `json:"unacked"`
	// Rejected counts the events the server rejected (not stored).
	Rejected int64 `json:"rejected"`
}

// eventHash is the record's hash of one event.
func eventHash(name string, us int64, insertID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	var b [10]byte
	b[0] = '|'
	binary.LittleEndian.PutUint64(b[1:9], uint64(us))
	b[9] = '|'
	h.Write(b[:])
	h.Write([]byte(insertID))
	return h.Sum64()
}

// loadBatch is one request: its body, and per event its user and hash for
// the record.
type loadBatch struct {
	body     []byte
	users    []string
	hashes   []uint64
	identify []bool // per event: it joins its user's anonymous id
}

// loadStats are the counters shared by the workers.
type loadStats struct {
	sent, acked, rejected, retries, requests atomic.Int64
	mu                                       sync.Mutex
	latencies                                []time.Duration // of the acknowledged requests
	firstReject                              string
}

// loadWorker makes and sends one worker's batches.
type loadWorker struct {
	c       *loadgenConfig
	id      int
	st      *loadStats
	gen     *gen.Generator
	epoch   int64
	ids     map[string]string // generator id → worker's user id
	prefix  string
	seq     uint64
	runID   uint64
	tally   map[string]*userTally
	unacked map[string]*userTally
	gz      *gzip.Writer
	raw     []byte
	ev      event.Event
}

func runLoadgen(cmd *cobra.Command, c *loadgenConfig) error {
	if c.batch < 1 || c.workers < 1 || c.users < int64(c.workers) {
		return fmt.Errorf("--batch and --workers must be at least 1, --users at least --workers")
	}
	if c.timeMode != "now" && c.timeMode != "gen" {
		return fmt.Errorf("--time %q: want now or gen", c.timeMode)
	}
	if c.duration <= 0 && c.events <= 0 {
		return errors.New("give --duration or --events")
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()
	}
	c.remote.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.workers, DisableCompression: true}}
	ctx := cmd.Context()
	sendCtx := ctx
	if c.duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	st := &loadStats{}
	cpu0 := cputime.Process()
	srvCPU0, srvErr := c.serverCPU(ctx)
	start := time.Now()
	workers := make([]*loadWorker, c.workers)
	errs := make([]error, c.workers)
	var wg sync.WaitGroup
	for i := range workers {
		w := &loadWorker{c: c, id: i, st: st, prefix: fmt.Sprintf("w%d-", i), runID: uint64(c.seed),
			ids: map[string]string{}, tally: map[string]*userTally{}, unacked: map[string]*userTally{}}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run(ctx, sendCtx)
		}()
	}
	stop := make(chan struct{})
	go c.progress(cmd.ErrOrStderr(), st, start, stop)
	wg.Wait()
	close(stop)
	elapsed := time.Since(start)
	cpu1 := cputime.Process()
	srvCPU1, _ := c.serverCPU(ctx)

	out := cmd.OutOrStdout()
	acked := st.acked.Load()
	fmt.Fprintf(out, "loadgen: %d events acknowledged in %s: %.0f events/s (%d requests of %d, %d retries, %d events rejected)\n",
		acked, elapsed.Round(time.Millisecond), float64(acked)/elapsed.Seconds(), st.requests.Load(), c.batch, st.retries.Load(), st.rejected.Load())
	if p := percentiles(st.latencies, 0.5, 0.99, 0.999); p != nil {
		fmt.Fprintf(out, "loadgen: ack latency p50 %s, p99 %s, p99.9 %s, max %s\n", p[0], p[1], p[2], p[3])
	}
	if cpu1 > 0 { // 0: not measured on this system
		fmt.Fprintf(out, "loadgen: CPU %.2f cores (this process)", (cpu1-cpu0).Seconds()/elapsed.Seconds())
		if c.serverMetric != "" && srvErr == nil {
			fmt.Fprintf(out, ", %.2f cores (the server)", (srvCPU1-srvCPU0)/elapsed.Seconds())
		}
		fmt.Fprintln(out)
	}
	if st.firstReject != "" {
		fmt.Fprintf(out, "loadgen: first rejection: %s\n", st.firstReject)
	}
	if c.record != "" {
		rec := loadRecord{App: c.app, Acked: acked, Rejected: st.rejected.Load(), Users: map[string]*userTally{}, Unacked: map[string]*userTally{}}
		for _, w := range workers {
			merge(rec.Users, w.tally)
			merge(rec.Unacked, w.unacked)
		}
		b, err := json.Marshal(rec)
		if err == nil {
			err = os.WriteFile(c.record, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("--record: %w", err)
		}
		fmt.Fprintf(out, "loadgen: record of %d users written to %s (%d users with events never acknowledged)\n", len(rec.Users), c.record, len(rec.Unacked))
	}
	return errors.Join(errs...)
}

// merge adds the tallies of from to into.
func merge(into, from map[string]*userTally) {
	for u, t := range from {
		if into[u] == nil {
			into[u] = &userTally{}
		}
		into[u].Events += t.Events
		into[u].Sum += t.Sum
	}
}

// progress prints a line every c.report until stop.
func (c *loadgenConfig) progress(w io.Writer, st *loadStats, start time.Time, stop chan struct{}) {
	if c.report <= 0 {
		return
	}
	t := time.NewTicker(c.report)
	defer t.Stop()
	last, lastT := int64(0), start
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			a := st.acked.Load()
			fmt.Fprintf(w, "loadgen: %6.0fs  %9.0f events/s  %d acknowledged  %d retries\n",
				now.Sub(start).Seconds(), float64(a-last)/now.Sub(lastT).Seconds(), a, st.retries.Load())
			last, lastT = a, now
		}
	}
}

// run sends batches until sendCtx is done or --events are sent; a batch
// being sent then is still retried until acknowledged (within
// --retry-timeout, and ctx).
func (w *loadWorker) run(ctx, sendCtx context.Context) error {
	c := w.c
	perWorker := c.rate / float64(c.workers)
	start := time.Now()
	var sent int64
	for sendCtx.Err() == nil {
		if c.events > 0 && w.st.sent.Add(int64(c.batch)) > c.events {
			return nil
		}
		if perWorker > 0 {
			due := start.Add(time.Duration(float64(sent) / perWorker * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-sendCtx.Done():
					return nil
				}
			}
		}
		b, err := w.make()
		if err != nil {
			return err
		}
		if err := w.send(ctx, b); err != nil {
			return err
		}
		sent += int64(c.batch)
	}
	return nil
}

// make builds the next batch.
func (w *loadWorker) make() (*loadBatch, error) {
	c := w.c
	b := &loadBatch{users: make([]string, 0, c.batch), hashes: make([]uint64, 0, c.batch)}
	w.raw = w.raw[:0]
	now := time.Now().UnixMicro()
	for i := 0; i < c.batch; i++ {
		if w.gen == nil || !w.gen.Next(&w.ev) {
			perWorker := c.users / int64(c.workers)
			g, err := gen.New(gen.Config{Events: perWorker * gen.EventsPerUser, Users: perWorker, Seed: c.seed + int64(w.id)*1_000_003 + w.epoch})
			if err != nil {
				return nil, err
			}
			w.gen, w.epoch = g, w.epoch+1
			w.gen.Next(&w.ev)
		}
		ev := &w.ev
		id, ok := w.ids[ev.UserID]
		if !ok {
			id = w.prefix + ev.UserID
			w.ids[ev.UserID] = id
		}
		ev.UserID = id
		if c.timeMode == "now" {
			ev.Time = now + int64(i)
		}
		w.seq++
		ev.InsertID = insertID(w.runID, w.id, w.seq)
		var user, once []event.Prop
		if ev.Name == "install" {
			user = ev.Props[:3]
			once = []event.Prop{{Name: "signup_time", Value: event.Time(ev.Time)}}
		}
		if c.identifyEvery > 0 && w.seq%uint64(c.identifyEvery) == 0 {
			ev.Name = "$identify"
			ev.Props = append(ev.Props[:0], event.Prop{Name: "$anon_distinct_id", Value: event.String("anon-" + id)})
			user, once = nil, nil
		}
		if c.sdk.proto != "" {
			if c.sdk.msTime() {
				ev.Time -= ev.Time % 1000
			}
			if i == 0 {
				w.raw = c.sdk.begin(w.raw)
			}
			anon := ""
			if c.anonymousID || ev.Name == "$identify" {
				anon = "anon-" + id
			}
			w.raw = c.sdk.event(w.raw, ev, user, once, anon)
			if i == c.batch-1 {
				w.raw = c.sdk.end(w.raw)
			}
		} else {
			w.raw = ingest.AppendEventJSON(w.raw, ev, user, once)
			if c.anonymousID {
				// The object's closing brace: add the field before it.
				w.raw = append(strconv.AppendQuote(append(w.raw[:len(w.raw)-1], `,"anonymous_id":`...), "anon-"+id), '}')
			}
			w.raw = append(w.raw, '\n')
		}
		b.users = append(b.users, id)
		b.hashes = append(b.hashes, eventHash(ev.Name, ev.Time, ev.InsertID))
		b.identify = append(b.identify, c.anonymousID || ev.Name == "$identify")
	}
	if !c.gzip {
		b.body = slices.Clone(w.raw)
		return b, nil
	}
	var buf bytes.Buffer
	if w.gz == nil {
		w.gz, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	} else {
		w.gz.Reset(&buf)
	}
	w.gz.Write(w.raw)
	if err := w.gz.Close(); err != nil {
		return nil, err
	}
	b.body = buf.Bytes()
	return b, nil
}

// insertID returns a UUID-shaped insert id (36 characters, as SDKs send)
// unique per run, worker and sequence number.
func insertID(run uint64, worker int, seq uint64) string {
	const hex = "0123456789abcdef"
	var b [36]byte
	put := func(at, digits int, v uint64) {
		for i := digits - 1; i >= 0; i-- {
			b[at+i] = hex[v&15]
			v >>= 4
		}
	}
	put(0, 8, run&0xffffffff)
	b[8] = '-'
	put(9, 4, run>>32&0xffff)
	b[13] = '-'
	put(14, 4, uint64(worker)&0xffff)
	b[18] = '-'
	put(19, 4, seq>>48)
	b[23] = '-'
	put(24, 12, seq&(1<<48-1))
	return string(b[:])
}

// eventsAnswer is the events endpoint's 200 answer.
type eventsAnswer struct {
	Accepted int `json:"accepted"`
	Rejected []struct {
		Index   int    `json:"index"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"rejected"`
}

// send posts b until it is acknowledged, retrying it unchanged; it
// returns an error for an answer that a retry cannot change (4xx) or a
// batch given up, after recording it as unacknowledged.
func (w *loadWorker) send(ctx context.Context, b *loadBatch) error {
	c := w.c
	hdr := http.Header{"Content-Type": {"application/x-ndjson"}}
	if c.gzip {
		hdr.Set("Content-Encoding", "gzip")
	}
	path := "api/apps/" + url.PathEscape(c.app) + "/events"
	if c.sdk.proto != "" {
		hdr, path = c.sdk.header(c.gzip), c.sdk.path()
	}
	first := time.Now()
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			w.st.retries.Add(1)
		}
		t0 := time.Now()
		body, err := c.remote.request(ctx, "POST", path, hdr, bytes.NewReader(b.body), 1<<20)
		lat := time.Since(t0)
		if err == nil {
			var ans eventsAnswer
			if c.sdk.proto != "" {
				if ans.Accepted, err = c.sdk.accepted(body, len(b.users)); err != nil {
					return err
				}
			} else if err := json.Unmarshal(body, &ans); err != nil {
				return fmt.Errorf("unreadable answer %.200q: %w", body, err)
			}
			w.acked(b, &ans, lat)
			return nil
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusRequestTimeout && ae.Status != http.StatusTooManyRequests {
			w.giveUp(b)
			return fmt.Errorf("events refused: %w", err)
		}
		if ctx.Err() != nil || time.Since(first) > c.retryTimeout {
			w.giveUp(b)
			return fmt.Errorf("a batch not acknowledged after %s: %w", time.Since(first).Round(time.Millisecond), err)
		}
		wait := backoff
		if ae != nil && ae.Status == http.StatusServiceUnavailable {
			wait = time.Second // Retry-After: 1
		}
		backoff = min(backoff*2, 2*time.Second)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
}

// acked records an acknowledged batch: its accepted events in the tally.
func (w *loadWorker) acked(b *loadBatch, ans *eventsAnswer, lat time.Duration) {
	rejected := map[int]bool{}
	for _, r := range ans.Rejected {
		rejected[r.Index] = true
	}
	for i, u := range b.users {
		if !rejected[i] {
			addTally(w.tally, u, b.hashes[i])
			w.tally[u].Identified = w.tally[u].Identified || b.identify[i]
		}
	}
	st := w.st
	st.acked.Add(int64(ans.Accepted))
	st.rejected.Add(int64(len(ans.Rejected)))
	st.requests.Add(1)
	st.mu.Lock()
	st.latencies = append(st.latencies, lat)
	if len(ans.Rejected) > 0 && st.firstReject == "" {
		r := ans.Rejected[0]
		st.firstReject = fmt.Sprintf("event %d, field %q: %s", r.Index, r.Field, r.Message)
	}
	st.mu.Unlock()
}

// giveUp records a batch never acknowledged: its events may or may not
// be stored.
func (w *loadWorker) giveUp(b *loadBatch) {
	for i, u := range b.users {
		addTally(w.unacked, u, b.hashes[i])
	}
}

// addTally adds an event of hash h to user u's tally in m.
func addTally(m map[string]*userTally, u string, h uint64) {
	t := m[u]
	if t == nil {
		t = &userTally{}
		m[u] = t
	}
	t.Events++
	t.Sum += h
}

// percentiles returns the ps quantiles of ds and their maximum (sorting
// ds), or nil when ds is empty.
func percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	if len(ds) == 0 {
		return nil
	}
	slices.Sort(ds)
	out := make([]time.Duration, 0, len(ps)+1)
	for _, p := range ps {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		out = append(out, ds[max(i, 0)].Round(10*time.Microsecond))
	}
	return append(out, ds[len(ds)-1].Round(10*time.Microsecond))
}

// serverCPU reads process_cpu_seconds_total from --server-metrics.
func (c *loadgenConfig) serverCPU(ctx context.Context) (float64, error) {
	if c.serverMetric == "" {
		return 0, errors.New("no --server-metrics")
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.serverMetric, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s has no process_cpu_seconds_total", c.serverMetric)
}

// runLoadCheck compares a --record file with the server's events of each
// user: every acknowledged event exactly once; a user with events never
// acknowledged may have any subset of them too.
func runLoadCheck(cmd *cobra.Command, c *loadgenConfig) error {
	b, err := os.ReadFile(c.check)
	if err != nil {
		return err
	}
	var rec loadRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("--check %s: %w", c.check, err)
	}
	app := rec.App
	users := make([]string, 0, len(rec.Users)+len(rec.Unacked))
	for u := range rec.Users {
		users = append(users, u)
	}
	for u := range rec.Unacked {
		if rec.Users[u] == nil {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	var bad, exact, uncertain int
	var total int64
	for _, u := range users {
		got, err := c.userTally(cmd.Context(), app, u)
		if err != nil {
			return fmt.Errorf("user %s: %w", u, err)
		}
		if w := rec.Users[u]; w != nil && w.Identified {
			// Every acknowledged merge holds: anon-USER is in USER's person.
			var p struct {
				PersonID string `json:"person_id"`
			}
			if err := c.remote.requestJSON(cmd.Context(), "GET", fmt.Sprintf("api/apps/%s/persons/%s", url.PathEscape(app), url.PathEscape("anon-"+u)), nil, &p); err != nil {
				return fmt.Errorf("person of anon-%s: %w", u, err)
			}
			got.Identified = p.PersonID == u
		}
		total += got.Events
		want := rec.Users[u]
		if want == nil {
			want = &userTally{}
		}
		switch un := rec.Unacked[u]; {
		case *got == *want:
			exact++
		case un != nil && got.Events >= want.Events && got.Events <= want.Events+un.Events:
			uncertain++ // some of the unacknowledged events are stored
		default:
			bad++
			if bad <= 10 {
				fmt.Fprintf(cmd.ErrOrStderr(), "loadgen check: user %s holds %d events (checksum %x), acknowledged %d (checksum %x)\n",
					u, got.Events, got.Sum, want.Events, want.Sum)
			}
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "loadgen check: %d users, %d events stored, %d acknowledged: %d users exact, %d with unacknowledged events partly stored, %d wrong\n",
		len(users), total, rec.Acked, exact, uncertain, bad)
	if bad > 0 {
		return fmt.Errorf("%d users do not hold exactly their acknowledged events", bad)
	}
	return nil
}

// userTally reads user u's events from the server and tallies them.
func (c *loadgenConfig) userTally(ctx context.Context, app, u string) (*userTally, error) {
	t := &userTally{}
	for offset := 0; ; {
		var page struct {
			Total  int `json:"total"`
			Events []struct {
				Time     string `json:"time"`
				Event    string `json:"event"`
				InsertID string `json:"insert_id"`
			} `json:"events"`
		}
		path := fmt.Sprintf("api/apps/%s/users/%s/events?tz=UTC&limit=1000&offset=%d", url.PathEscape(app), url.PathEscape(u), offset)
		if err := c.remote.requestJSON(ctx, "GET", path, nil, &page); err != nil {
			return nil, err
		}
		for _, e := range page.Events {
			us, err := event.ParseTime(e.Time, nil)
			if err != nil {
				return nil, err
			}
			t.Events++
			t.Sum += eventHash(e.Event, us, e.InsertID)
		}
		offset += len(page.Events)
		if len(page.Events) == 0 || offset >= page.Total {
			return t, nil
		}
	}
}

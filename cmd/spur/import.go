package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/export"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/storage"
	"golang.org/x/term"
)

// importConfig is what `spur import` passes to the library.
type importConfig struct {
	app       string
	format    string
	users     bool
	userCol   string
	timeCol   string
	eventCol  string
	insertCol string
	schema    string
	tz        string
	maxErrors int
	progress  string
	noCompact bool
	remote    remote
	maxProp   int
	// anonCol is --anonymous-id: the column of each row's anonymous id
	// (storage.ImportOptions.AnonymousID).
	anonCol string
	// persons is --persons: a persons file (spur export --persons) that
	// alone defines the id graph (storage.ImportOptions.Persons).
	persons string
}

func newImportCmd(g *globals) *cobra.Command {
	c := &importConfig{}
	cmd := &cobra.Command{
		Use:   "import --app NAME [flags] FILE...",
		Short: "Import events (or, with --users, user properties) from CSV, NDJSON, Parquet or OTTO JSONL files",
		Long: `Import reads every FILE (.gz transparently) and publishes all their rows in one
atomic step: either every good row is applied or nothing is.

With --max-errors 0 (the default) any bad row aborts the import and nothing is
applied; every bad row found is reported with file, line, field and reason.
With --max-errors N, up to N bad rows are reported and skipped and the good
rows are applied.

While spur serve holds the store (it is its only writer), send the files
through its API with --url http://HOST:PORT: each file is then one atomic
import of the server's.

Identity (docs/identity.md §4): rows named $identify, $create_alias and
$merge_dangerously apply their operations to the app's id graph in file order,
and --anonymous-id COLUMN applies identify(user, anonymous id) for each row
whose cell is non-empty. With --persons FILE (a spur export --persons file,
NDJSON, Parquet or CSV with columns distinct_id, person_id, identified) the
persons file alone defines the persons: it is read whole first (any bad row
fails the import), the persons it lists are rebuilt with the same person ids
and identified flags, and the files' operation rows are stored as plain events.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.remote.url != "" {
				if c.persons != "" {
					return errors.New("--persons: not through --url (the import endpoint takes one file); import locally, with the server stopped")
				}
				return importViaServer(cmd, c, args)
			}
			st, err := openStore(g, writeStore, "spur import")
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := runImport(cmd, st, c, args)
			if rep != nil {
				printReport(cmd.ErrOrStderr(), rep, err == nil)
			}
			if err == nil && !c.noCompact {
				autoCompact(cmd, st, c.app)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.app, "app", "", "app to import into (created if missing)")
	f.StringVar(&c.format, "format", "", "csv, ndjson, parquet or otto (default: from the file extension)")
	f.BoolVar(&c.users, "users", false, "the files hold user properties (user id + properties), not events")
	f.StringVar(&c.userCol, "user", "user_id", "column holding the user id")
	f.StringVar(&c.timeCol, "time", "timestamp", "column holding the event time")
	f.StringVar(&c.eventCol, "event", "event", "column holding the event name")
	f.StringVar(&c.insertCol, "insert-id", "insert_id", "column holding the deduplication key (optional)")
	f.StringVar(&c.anonCol, "anonymous-id", "", "column holding each row's anonymous (device) id: a non-empty one applies identify(user, anonymous id), joining the two into one person (docs/identity.md §4)")
	f.StringVar(&c.persons, "persons", "", "persons file (spur export --persons) that alone defines the id graph: its persons are rebuilt and the files' $identify/$create_alias/$merge_dangerously rows are plain events (docs/identity.md §4)")
	f.StringVar(&c.schema, "schema", "", "declared property types: name:type,... (types: string, int, float, bool, time)")
	f.StringVar(&c.tz, "tz", "UTC", "time zone for timestamps without an offset (IANA name)")
	f.IntVar(&c.maxErrors, "max-errors", 0, "bad rows tolerated; more aborts the import with nothing applied")
	f.StringVar(&c.progress, "progress", "auto", "progress bar: auto (on a terminal), always, never")
	f.IntVar(&c.maxProp, "max-property-bytes", event.DefaultMaxPropertyBytes, "largest string property value (or insert id), bytes; a longer one is a bad row; negative: no limit")
	f.BoolVar(&c.noCompact, "no-compact", false, "do not compact the app afterwards (by default every shard with more than one run of events or of user properties is compacted, so queries read one run per shard; with --url the request sends no_compact=true)")
	c.remote.flags(f, "import through a running spur serve at this base URL (POST /api/apps/APP/import, one request per file, with an ingest or admin --key) instead of the --data store")
	cmd.MarkFlagRequired("app")
	return cmd
}

func parseSchema(s string) (map[string]event.Type, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]event.Type{}
	for _, part := range strings.Split(s, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("--schema: %q: want name:type", part)
		}
		t, err := event.ParseType(typ)
		if err != nil {
			return nil, fmt.Errorf("--schema: property %q: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// progressReader is implemented by ingest readers that know how many input
// bytes they have consumed.
type progressReader interface{ BytesRead() int64 }

func runImport(cmd *cobra.Command, st *storage.Store, c *importConfig, files []string) (*storage.ImportReport, error) {
	schema, err := parseSchema(c.schema)
	if err != nil {
		return nil, err
	}
	if c.anonCol != "" {
		if c.users {
			return nil, errors.New("--anonymous-id: a --users import carries no identity operations")
		}
		// Read as a string, whatever it looks like, or a numeric id
		// would be no anonymous id.
		if schema == nil {
			schema = map[string]event.Type{}
		}
		if _, ok := schema[c.anonCol]; !ok {
			schema[c.anonCol] = event.TypeString
		}
	}
	if c.persons != "" && (c.users || c.anonCol != "") {
		return nil, errors.New("--persons: not with --users or --anonymous-id: the persons file alone defines the id graph of an events import")
	}
	loc, err := event.LoadZone(c.tz)
	if err != nil {
		return nil, fmt.Errorf("--tz: %w", err)
	}
	opt := ingest.Options{
		Format: ingest.Format(c.format), UserCol: c.userCol, TimeCol: c.timeCol, EventCol: c.eventCol,
		InsertIDCol: c.insertCol, Schema: schema, Loc: loc, Users: c.users, ImportTime: time.Now().UnixMicro(),
		MaxPropertyBytes: c.maxProp,
	}
	var total int64
	var srcs []storage.Source
	var readers []ingest.Reader
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	for _, path := range files {
		r, err := ingest.Open(path, opt)
		if err != nil {
			return nil, err
		}
		readers = append(readers, r)
		srcs = append(srcs, r)
		if fi, err := os.Stat(path); err == nil {
			total += fi.Size()
		}
	}
	kind := storage.KindEvents
	if c.users {
		kind = storage.KindUsers
	}
	// Unless --no-compact, the runs of an import that spills are compacted
	// right after it (autoCompact), so they are written with fast zstd.
	iopt := storage.ImportOptions{Kind: kind, MaxErrors: c.maxErrors, CompactAfter: !c.noCompact, AnonymousID: c.anonCol}
	if c.persons != "" {
		pr, err := export.OpenPersons(c.persons)
		if err != nil {
			return nil, fmt.Errorf("--persons: %w", err)
		}
		defer pr.Close()
		iopt.Persons = pr
	}
	show := c.progress == "always" || (c.progress == "auto" && isTerminal(cmd.ErrOrStderr()))
	var bar *progressbar.ProgressBar
	if show {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(cmd.ErrOrStderr()),
			progressbar.OptionSetDescription("importing"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		start := time.Now()
		iopt.Progress = func(rows int64) {
			var done int64
			for _, r := range readers {
				if p, ok := r.(progressReader); ok {
					done += p.BytesRead()
				}
			}
			rate := float64(rows) / max(time.Since(start).Seconds(), 1e-9)
			bar.Describe(fmt.Sprintf("importing %d events (%.0f events/s)", rows, rate))
			bar.Set64(min(done, total))
		}
	}
	rep, err := st.Import(cmd.Context(), c.app, srcs, iopt)
	if bar != nil {
		bar.Finish()
	}
	return rep, err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func printReport(w io.Writer, rep *storage.ImportReport, ok bool) {
	if !ok {
		return // the error message lists the bad rows
	}
	rate := float64(rep.Read) / max(rep.Elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "imported %d %s rows into app %q in %s (%.0f rows/s): %d segments, %d bytes (%.2f bytes/row)",
		rep.Applied, rep.Kind, rep.App, rep.Elapsed.Round(time.Millisecond), rate, rep.Segments, rep.Bytes,
		float64(rep.Bytes)/max(float64(rep.Applied), 1))
	if rep.Duplicates > 0 {
		fmt.Fprintf(w, "; %d duplicate insert_id rows dropped", rep.Duplicates)
	}
	if rep.Expired > 0 {
		fmt.Fprintf(w, "; %d events older than the app's retention skipped", rep.Expired)
	}
	if rep.IdentityOps > 0 {
		fmt.Fprintf(w, "; %d identity operations applied", rep.IdentityOps)
	}
	fmt.Fprintln(w)
	if rep.Rejected > 0 {
		fmt.Fprintf(w, "%d bad rows skipped (within --max-errors):\n", rep.Rejected)
		for _, e := range rep.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// importViaServer sends each file to a running server's import endpoint
// (the CLI's twin of POST /api/apps/{app}/import), one atomic import per
// file, and prints each server report. It stops at the first failure,
// with the server's error message.
func importViaServer(cmd *cobra.Command, c *importConfig, files []string) error {
	rm := &c.remote
	if err := rm.open(); err != nil {
		return err
	}
	params := url.Values{"user": {c.userCol}, "time": {c.timeCol}, "event": {c.eventCol},
		"insert_id": {c.insertCol}, "tz": {c.tz}, "max_errors": {strconv.Itoa(c.maxErrors)}}
	if c.format != "" {
		params.Set("format", c.format)
	}
	if c.schema != "" {
		params.Set("schema", c.schema)
	}
	if c.users {
		params.Set("users", "true")
	}
	if c.noCompact {
		params.Set("no_compact", "true") // the server compacts after each request otherwise
	}
	if c.anonCol != "" {
		params.Set("anonymous_id", c.anonCol)
	}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		params.Set("name", filepath.Base(path))
		body, err := rm.request(cmd.Context(), http.MethodPost, "api/apps/"+url.PathEscape(c.app)+"/import?"+params.Encode(), nil, f, 16<<20)
		f.Close()
		if err != nil {
			return fmt.Errorf("import %s through %s: %w", path, rm.url, err)
		}
		var rep storage.ImportReport
		var ms struct {
			ElapsedMS float64 `json:"elapsed_ms"`
		}
		if err := errors.Join(json.Unmarshal(body, &rep), json.Unmarshal(body, &ms)); err != nil {
			return fmt.Errorf("import %s through %s: unreadable answer: %w", path, rm.url, err)
		}
		rep.Elapsed = time.Duration(ms.ElapsedMS * float64(time.Millisecond))
		printReport(cmd.ErrOrStderr(), &rep, true)
	}
	return nil
}

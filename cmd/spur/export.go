package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/export"
	"github.com/spurdb/spur/storage"
)

// exportConfig is what `spur export` was asked.
type exportConfig struct {
	app, format, out, from, to string
	users, persons             bool
	remote                     remote
}

func newExportCmd(g *globals) *cobra.Command {
	c := &exportConfig{}
	cmd := &cobra.Command{
		Use:   "export --app NAME --format ndjson|parquet [--users | --persons] [--out FILE]",
		Short: "Write an app's events (or, with --users, its users' properties, with --persons its persons) as NDJSON or Parquet that spur import reads back",
		Long: `Export writes one consistent snapshot of an app's events — or, with --users, every
user's current properties, or with --persons its persons — to --out (standard
output without it), in the shape spur import reads with no column flags: NDJSON
in the events endpoint's shape (user_id, event, timestamp, insert_id,
properties), or Parquet with the columns user_id, timestamp, event, insert_id and
one column per property. Events keep the distinct id they were sent with.

--persons writes one row {distinct_id, person_id, identified} per distinct id of
every person of the app's id graph (an id no identity operation named is a
person of its own and has no row). spur import --persons FILE rebuilds the same
persons from it, so that importing the events, users and persons files into a
new app gives the same answers (docs/storage.md §8, docs/identity.md §4):

  spur export --app a --format parquet --out events.parquet
  spur export --app a --format parquet --users --out users.parquet
  spur export --app a --format parquet --persons --out persons.parquet
  spur import --app b --persons persons.parquet events.parquet
  spur import --app b --users users.parquet

Rows come by shard, then user (by the hash of the id), then time, then arrival;
two exports of one snapshot are byte-identical. On a failure the --out file is
removed.

NDJSON has no time type: time properties are written as RFC 3339 strings, which
import as strings unless typed time (--schema NAME:time; the command lists them).
Parquet keeps every type.

While spur serve holds the store, --url exports through its API (GET
/api/apps/APP/export), which also includes events not yet flushed to segments.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.persons && c.users {
				return errors.New("--users and --persons: choose one")
			}
			f, err := export.ParseFormat(c.format)
			if err != nil {
				return fmt.Errorf("--format: %w", err)
			}
			opt := export.Options{Format: f, Users: c.users, Persons: c.persons}
			if (c.from == "") != (c.to == "") {
				return errors.New("--from and --to: give both")
			}
			if c.from != "" {
				if opt.From, err = event.ParseTime(c.from, nil); err != nil {
					return fmt.Errorf("--from: %w", err)
				}
				if opt.To, err = event.ParseTime(c.to, nil); err != nil {
					return fmt.Errorf("--to: %w", err)
				}
			}
			var w io.Writer = cmd.OutOrStdout()
			var file *os.File
			if c.out != "" {
				// Written beside --out and renamed over it once complete: a
				// failed export leaves no partial file and an existing
				// --out untouched.
				file, err = os.CreateTemp(filepath.Dir(c.out), "."+filepath.Base(c.out)+".*.tmp")
				if err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				w = file
			}
			start := time.Now()
			var st export.Stats
			if c.remote.url != "" {
				st, err = exportViaServer(cmd, c, w)
			} else {
				st, err = exportLocal(cmd, g, c, opt, w)
			}
			if file != nil {
				if cerr := file.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					err = os.Rename(file.Name(), c.out)
				}
				if err != nil {
					os.Remove(file.Name()) // an incomplete export must not look like one
				}
			}
			if err != nil {
				return err
			}
			el := time.Since(start)
			what := "events"
			if c.users {
				what = "users"
			} else if c.persons {
				what = "persons rows (distinct ids)"
			}
			if st.Rows >= 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "exported %d %s of app %q (%d bytes) in %s (%.0f rows/s)\n",
					st.Rows, what, c.app, st.Bytes, el.Round(time.Millisecond), float64(st.Rows)/max(el.Seconds(), 1e-9))
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "exported the %s of app %q (%d bytes) in %s\n", what, c.app, st.Bytes, el.Round(time.Millisecond))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&c.app, "app", "", "app to export")
	fl.StringVar(&c.format, "format", "ndjson", "ndjson or parquet")
	fl.BoolVar(&c.users, "users", false, "export the users' current properties instead of the events")
	fl.BoolVar(&c.persons, "persons", false, "export the persons instead of the events: a {distinct_id, person_id, identified} row per distinct id of every person of the id graph, which spur import --persons reads")
	fl.StringVar(&c.out, "out", "", "file to write (default: standard output)")
	fl.StringVar(&c.from, "from", "", "export only events at or after this time (with --to; RFC 3339 or a date)")
	fl.StringVar(&c.to, "to", "", "export only events before this time (with --from)")
	c.remote.flags(fl, "export through a running spur serve at this base URL (GET /api/apps/APP/export, with a query or admin --key) instead of the --data store")
	cmd.MarkFlagRequired("app")
	return cmd
}

// exportLocal exports from the --data store, read-only.
func exportLocal(cmd *cobra.Command, g *globals, c *exportConfig, opt export.Options, w io.Writer) (export.Stats, error) {
	var st export.Stats
	err := withApp(g, readStore, c.app, func(_ *storage.Store, a *storage.App) error {
		v, err := a.Acquire()
		if err != nil {
			return err
		}
		defer v.Release()
		switch {
		case opt.Format != export.NDJSON || opt.Persons:
		case opt.Users:
			noteTimeProps(cmd.ErrOrStderr(), v.ExportProps(storage.KindUsers))
		default:
			noteTimeProps(cmd.ErrOrStderr(), v.ExportProps(storage.KindEvents))
		}
		st, err = export.Write(cmd.Context(), v, w, opt)
		return err
	})
	return st, err
}

// noteTimeProps tells which --schema keeps NDJSON's time properties time.
func noteTimeProps(w io.Writer, props []event.PropType) {
	var s string
	for _, p := range props {
		if p.Type == event.TypeTime {
			if s != "" {
				s += ","
			}
			s += p.Name + ":time"
		}
	}
	if s != "" {
		fmt.Fprintf(w, "note: NDJSON writes time properties as RFC 3339 strings; import with --schema %s to keep them time\n", s)
	}
}

// exportViaServer streams GET /api/apps/APP/export of --url into w. Its
// Stats count bytes only (Rows -1).
func exportViaServer(cmd *cobra.Command, c *exportConfig, w io.Writer) (export.Stats, error) {
	rm := &c.remote
	if err := rm.open(); err != nil {
		return export.Stats{}, err
	}
	params := url.Values{"format": {c.format}}
	if c.users {
		params.Set("users", "true")
	}
	if c.persons {
		params.Set("persons", "true")
	}
	if c.from != "" {
		params.Set("from", c.from)
		params.Set("to", c.to)
	}
	_, n, err := rm.send(cmd.Context(), http.MethodGet, "api/apps/"+url.PathEscape(c.app)+"/export?"+params.Encode(), nil, nil, 1<<20, w)
	if err != nil {
		return export.Stats{}, fmt.Errorf("export through %s: %w", rm.url, err)
	}
	return export.Stats{Rows: -1, Bytes: n}, nil
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// newEventsCmd is `spur events delete`: deleting events by predicate
// (docs/storage.md §7), on the --data store or through a running server.
func newEventsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events delete",
		Short: "Delete an app's events by name, event-property filters and time range",
	}
	var app, name, where, tz string
	var rng query.Range
	var rm remote
	del := &cobra.Command{
		Use:   "delete --app APP --event E [--where JSON] (--from F --to T | --last D) [--tz Z]",
		Short: "Delete the events matching a series' matcher in a range (a bad release, test traffic)",
		Long: `Delete deletes the events of APP named E ("$any": every name) whose event
properties pass --where (a JSON array of docs/analytics.md §3 filters on event
properties, as a series' "where") and whose time lies in the range (--from and
--to: dates at midnight in --tz, the app's time zone by default, or RFC 3339
instants; or --last as a relative range), stored before the request. They are
hidden from every query from the answer on; their bytes leave the store's files
at ` + "`spur compact --erase`" + ` (or within spur serve's --erase-within). The request is
listed by GET /api/apps/{app}/deletions.

Without --url it works on the --data store (which no spur serve may hold);
with --url through a running server (an admin --key).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return errors.New(`--event is required ("$any" for every event)`)
			}
			if where != "" {
				var buf bytes.Buffer
				if err := json.Compact(&buf, []byte(where)); err != nil {
					return fmt.Errorf("--where: want a JSON array of filters: %w", err)
				}
				where = buf.String()
			}
			if rm.url != "" {
				if err := rm.open(); err != nil {
					return err
				}
				body := map[string]any{"event": name, "range": rng}
				if where != "" {
					body["where"] = json.RawMessage(where)
				}
				if tz != "" {
					body["tz"] = tz
				}
				var d deletionAnswer
				if err := rm.requestJSON(cmd.Context(), "POST", "api/apps/"+url.PathEscape(app)+"/delete", body, &d); err != nil {
					return fmt.Errorf("delete events through %s: %w", rm.url, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deletion %s %s\n", d.ID, d.Status)
				return nil
			}
			st, err := openLiveStore(g, "spur events delete")
			if err != nil {
				return err
			}
			defer st.Close()
			a, err := st.App(app)
			if err != nil {
				return err
			}
			if tz == "" {
				tz = a.Current().TZ
			}
			from, to, err := query.ResolveRange(rng, tz, time.Now().UnixMicro())
			if err != nil {
				return err
			}
			d, err := st.DeleteEvents(cmd.Context(), app, storage.EventMatch{Event: name, Where: where, From: from, To: to})
			if err != nil {
				return err
			}
			if err := st.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deletion %s pending: %s events in [%s, %s)\n", d.ID, name,
				time.UnixMicro(from).UTC().Format(time.RFC3339), time.UnixMicro(to).UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := del.Flags()
	f.StringVar(&app, "app", "", "app of the events (required)")
	f.StringVar(&name, "event", "", `event name ("$any": every event)`)
	f.StringVar(&where, "where", "", `event-property filters, a JSON array: '[{"property": "build", "op": "eq", "value": "7.1"}]'`)
	f.StringVar(&rng.From, "from", "", "start of the range: a date or an RFC 3339 instant")
	f.StringVar(&rng.To, "to", "", "end of the range (exclusive)")
	f.StringVar(&rng.Last, "last", "", "a relative range instead (e.g. 7d)")
	f.StringVar(&tz, "tz", "", "time zone of dates (default: the app's)")
	rm.flags(f, "work through a running spur serve at this base URL instead of the --data store")
	del.MarkFlagRequired("app")
	cmd.AddCommand(del)
	return cmd
}

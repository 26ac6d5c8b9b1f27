package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

func newCompactCmd(g *globals) *cobra.Command {
	var app string
	var opt storage.CompactOptions
	var erase bool
	cmd := &cobra.Command{
		Use:   "compact --app NAME [--max-segment-rows N] [--force] [--erase]",
		Short: "Merge each shard's segments into one run of large segments, so queries merge fewer streams",
		Long: `Compact rewrites, per shard and kind (events, users), all the shard's segments
as a few segments of at most --max-segment-rows rows with disjoint user ranges
(one run), and publishes them in one atomic step; queries then merge one stream
per shard instead of one per import flush. Shards already one run are left
alone unless --force. Interrupting it (Ctrl-C) changes nothing.

The replaced files stay on disk (a running server may still read them) until
the next import or compaction of the app deletes them.

For an app with a retention (spur apps set --retention), it first drops the
events segments wholly past it, then rewrites every shard whose events
segments hold some expired events without them (--expire=false leaves those
shards to a later compaction).

spur import and spur gen --app compact automatically when some shard has more
than one run of a kind (--no-compact skips that): a query over several runs
per shard merges them user by user, 2-3 times slower than over one run.

With --erase it completes the app's pending erasures instead (docs/storage.md §7,
` + "`spur persons delete`" + `): the segments that hold an erased person's rows are
rewritten without them, the write-ahead log before the request released, the id
graph rewritten with tombstones, and the requests marked done; afterwards no file
of the app holds the erased ids or their events.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if erase {
				st, err := openLiveStore(g, "spur compact --erase")
				if err != nil {
					return err
				}
				defer st.Close()
				rep, err := st.Erase(cmd.Context(), app)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "app %q: %d deletion requests done in %s; %d segments (%d bytes) rewritten of %d (%d bytes)\n",
					app, len(rep.Done), rep.Elapsed.Round(time.Millisecond), rep.Rewritten, rep.RewrittenBytes, rep.Segments, rep.Bytes)
				return st.Close()
			}
			st, err := openStore(g, writeStore, "spur compact")
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := st.Compact(cmd.Context(), app, opt)
			if err != nil {
				return err
			}
			printCompactReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "app to compact")
	f.IntVar(&opt.MaxSegmentRows, "max-segment-rows", storage.DefaultMaxSegmentRows, "rows per output segment at most (one user's rows are never split); memory grows with it")
	f.BoolVar(&opt.Force, "force", false, "also rewrite shards that are one run already (e.g. to apply a new --max-segment-rows)")
	f.IntVar(&opt.Workers, "workers", 0, "shards compacted in parallel (0 = GOMAXPROCS); memory grows with it")
	f.BoolVar(&erase, "erase", false, "complete the pending deletion requests (erasures, events deletions): rewrite the segments holding their rows (docs/storage.md §7)")
	f.BoolVar(&opt.Expire, "expire", true, "also rewrite the shards holding events past the app's retention (spur apps set --retention), so their bytes go")
	cmd.MarkFlagRequired("app")
	return cmd
}

// openLiveStore opens the --data store with its writer role and the live
// layer, as spur serve does (no server may hold it): for the commands
// that go through the write-ahead log (erasure). Close publishes what
// they logged.
func openLiveStore(g *globals, holder string) (*storage.Store, error) {
	cfg := storeConfig(g, writeStore, holder)
	cfg.Writer, cfg.Live = true, &storage.LiveOptions{}
	return openStoreConfig(g, writeStore, cfg)
}

// autoCompact applies the post-import policy: compact the app's shards
// that have more than one run of events or of user properties
// (storage.ImportCompactMinRuns, AutoCompactUserMinRuns), so that queries
// right after an import run at compacted speed. The import is already
// published, so a failure is a warning on w, not an error of the command.
func autoCompact(cmd *cobra.Command, st *storage.Store, app string) {
	w := cmd.ErrOrStderr()
	rep, err := st.Compact(cmd.Context(), app, storage.CompactOptions{MinRuns: storage.ImportCompactMinRuns, UserMinRuns: storage.AutoCompactUserMinRuns})
	if err != nil {
		fmt.Fprintf(w, "warning: automatic compaction failed, the import is published (retry with spur compact --app %s): %v\n", app, err)
		return
	}
	if rep.Written > 0 || rep.RowsExpired > 0 {
		printCompactReport(w, rep)
	}
}

func printCompactReport(w io.Writer, rep *storage.CompactReport) {
	if rep.RowsExpired > 0 {
		fmt.Fprintf(w, "app %q: %d events past the retention dropped (%d whole segments)\n", rep.App, rep.RowsExpired, rep.Expired)
	}
	if rep.Written == 0 {
		fmt.Fprintf(w, "app %q: nothing to compact (%d segments, %d bytes; every shard is one run of each kind)\n",
			rep.App, rep.SegmentsBefore, rep.BytesBefore)
		return
	}
	fmt.Fprintf(w, "compacted app %q in %s: segments %d → %d (%d replaced by %d in %d shard groups), %d rows rewritten, bytes %d → %d (%.2f → %.2f MiB); the replaced files are deleted by the next write\n",
		rep.App, rep.Elapsed.Round(time.Millisecond), rep.SegmentsBefore, rep.SegmentsAfter, rep.Replaced, rep.Written,
		rep.Groups, rep.Rows, rep.BytesBefore, rep.BytesAfter, float64(rep.BytesBefore)/(1<<20), float64(rep.BytesAfter)/(1<<20))
}

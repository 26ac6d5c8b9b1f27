package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/server"
	"github.com/spurdb/spur/storage"
)

// keysConfig are the flags of `spur keys …`.
type keysConfig struct {
	remote remote
	scope  string
	app    string
	name   string
	// snippets and publicURL: `keys create --snippets [--public-url URL]`.
	snippets  bool
	publicURL string
}

func newKeysCmd(g *globals) *cobra.Command {
	c := &keysConfig{}
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys (ingest, query or admin)",
		Long: `Keys authenticate every API request (Authorization: Bearer KEY, docs/ingest.md §4):

  ingest  sends events to one app (POST /api/apps/APP/events, imports); a key
          for a browser SDK, which can read nothing
  query   queries one app, reads its schema and users, saves its cohorts,
          insights and dashboards (the analyst's key)
  admin   everything, on every app, including keys

A key is shown once, when created (printed alone on its own line); the store
keeps only its SHA-256. While spur serve runs it is the store's only writer:
give --url http://HOST:PORT and an admin --key (or $SPUR_KEY) to manage keys
through its API, where a revoked key is refused from the next request on.
Without --url the --data store is changed directly (spur serve stopped).`,
	}
	create := &cobra.Command{
		Use:   "create --scope ingest|query --app APP | --scope admin",
		Short: "Create a key and print it (shown this once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := server.SDKSnippets(c.publicURL, ""); c.snippets && err != nil {
				return fmt.Errorf("--public-url: %w", err) // before a key is made
			}
			var k createdKey
			req := map[string]string{"scope": c.scope, "app": c.app, "name": c.name}
			err := c.with(g, cmd, func(ks *server.Keys) error {
				secret, rec, err := ks.Create(server.Scope(c.scope), c.app, c.name)
				k = createdKey{Secret: secret, Key: rec}
				return err
			}, func(rm *remote) error { return rm.requestJSON(cmd.Context(), "POST", "api/keys", req, &k) })
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.Secret)
			what := fmt.Sprintf("%s key %s", k.Scope, k.ID)
			if k.App != "" {
				what += " for app " + k.App
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s; the key above is shown this once: keep it now\n", what)
			if c.snippets {
				return printSnippets(cmd.ErrOrStderr(), k.Scope, c.publicURL, k.Secret)
			}
			return nil
		},
	}
	create.Flags().StringVar(&c.scope, "scope", "", "ingest, query or admin")
	create.Flags().StringVar(&c.app, "app", "", "the app of an ingest or query key")
	create.Flags().StringVar(&c.name, "name", "", "what the key is for (shown in lists)")
	create.Flags().BoolVar(&c.snippets, "snippets", false, "also print on stderr, for each supported SDK (PostHog, Segment, Amplitude, Mixpanel), the lines that point it at the server with this key (ingest keys only; docs/sdks.md)")
	create.Flags().StringVar(&c.publicURL, "public-url", "", "the server's base URL as the SDKs reach it, for --snippets (default "+server.SnippetBasePlaceholder+", to replace)")
	create.MarkFlagRequired("scope")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys (id, scope, app, created, name; never the keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var keys []server.Key
			err := c.with(g, cmd, func(ks *server.Keys) error {
				keys = ks.List()
				return nil
			}, func(rm *remote) error {
				var out struct{ Keys []server.Key }
				err := rm.requestJSON(cmd.Context(), "GET", "api/keys", nil, &out)
				keys = out.Keys
				return err
			})
			if err != nil {
				return err
			}
			printKeys(cmd.OutOrStdout(), keys)
			return nil
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key: it is refused from the next request on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := c.with(g, cmd, func(ks *server.Keys) error { return ks.Revoke(args[0]) },
				func(rm *remote) error {
					return rm.requestJSON(cmd.Context(), "DELETE", "api/keys/"+url.PathEscape(args[0]), nil, nil)
				})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "revoked key %s\n", args[0])
			return nil
		},
	}
	for _, sub := range []*cobra.Command{create, list, revoke} {
		c.remote.flags(sub.Flags(), "manage the keys of a running spur serve at this base URL (with an admin --key) instead of the --data store")
		cmd.AddCommand(sub)
	}
	return cmd
}

// printSnippets writes to w the server.SDKSnippets of an ingest key for
// the server at publicURL, each under a "# SDK (language)" heading; for
// another scope, one line saying there are none.
func printSnippets(w io.Writer, scope server.Scope, publicURL, key string) error {
	if scope != server.ScopeIngest {
		fmt.Fprintf(w, "no SDK snippets: the SDKs send events with an ingest key, this is a %s key (spur keys create --scope ingest --app APP --snippets)\n", scope)
		return nil
	}
	snips, err := server.SDKSnippets(publicURL, key)
	if err != nil {
		return fmt.Errorf("--public-url: %w", err)
	}
	fmt.Fprintln(w, "\nPoint an SDK at this server with the lines below (docs/sdks.md says what each sends and how it is mapped):")
	if publicURL == "" {
		fmt.Fprintf(w, "(replace %s with the server's address as the SDKs reach it, or give --public-url)\n", server.SnippetBasePlaceholder)
	}
	for _, s := range snips {
		fmt.Fprintf(w, "\n# %s (%s)\n%s\n", s.SDK, s.Language, s.Code)
	}
	return nil
}

// createdKey is the answer of POST /api/keys.
type createdKey struct {
	Secret string `json:"key"`
	server.Key
}

// with runs direct on the --data store's keys, or, with --url, remote on
// the server's API. A direct change refused because spur serve holds the
// store says to use --url.
func (c *keysConfig) with(g *globals, cmd *cobra.Command, direct func(*server.Keys) error, remoteFn func(*remote) error) error {
	if c.remote.url != "" {
		if err := c.remote.open(); err != nil {
			return err
		}
		if err := remoteFn(&c.remote); err != nil {
			return fmt.Errorf("keys through %s: %w", c.remote.url, err)
		}
		return nil
	}
	st, err := openStore(g, writeStore, "spur keys")
	if err != nil {
		return err
	}
	defer st.Close()
	ks, err := server.OpenKeys(st)
	if err != nil {
		return err
	}
	err = direct(ks)
	if errors.Is(err, storage.ErrLocked) {
		return fmt.Errorf("%w\nwhile spur serve runs, manage keys through it: spur keys %s --url http://HOST:PORT (with an admin --key or $%s)", err, cmd.Name(), keyEnv)
	}
	return err
}

// printKeys writes keys as a table.
func printKeys(w io.Writer, keys []server.Key) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tAPP\tCREATED\tNAME")
	for _, k := range keys {
		app := k.App
		if app == "" {
			app = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Scope, app, k.Created, k.Name)
	}
	tw.Flush()
}

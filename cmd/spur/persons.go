package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

// personAnswer is what `spur persons` prints of a person: the person
// page's fields (server/users.go) it needs.
type personAnswer struct {
	PersonID    string   `json:"person_id"`
	DistinctIDs []string `json:"distinct_ids"`
}

// newPersonsCmd is `spur persons merge|show`: the id graph of an app by
// hand (docs/identity.md §2), on the --data store or through a running
// server (--url).
func newPersonsCmd(g *globals) *cobra.Command {
	var app string
	var rm remote
	cmd := &cobra.Command{
		Use:   "persons merge|show",
		Short: "Merge two persons of an app by hand, or show the person of a distinct id",
		Long: `Every distinct id (user_id) belongs to one person; identify and alias
operations (an event's anonymous_id, $identify and $create_alias events) join
them by docs/identity.md §2's rules. "merge" forces merge(T, O): O's person joins
T's whatever either is, permanently (no split). "show" prints a person's id and
its distinct ids.

Without --url they work on the --data store (which no spur serve may hold);
with --url through a running server (merge needs an admin --key).`,
	}
	cmd.PersistentFlags().StringVar(&app, "app", "", "app of the persons (required)")
	cmd.MarkPersistentFlagRequired("app")
	rm.flags(cmd.PersistentFlags(), "work through a running spur serve at this base URL instead of the --data store")
	// either runs viaServer once --url is checked, else local.
	either := func(viaServer, local func() error) error {
		if rm.url == "" {
			return local()
		}
		if err := rm.open(); err != nil {
			return err
		}
		return viaServer()
	}

	merge := &cobra.Command{
		Use:   "merge --app APP T O",
		Short: "Apply merge(T, O): the persons of distinct ids T and O become one, durably",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p personAnswer
			err := either(func() error {
				body := map[string][]string{"ids": {args[0], args[1]}}
				if err := rm.requestJSON(cmd.Context(), "POST", "api/apps/"+url.PathEscape(app)+"/persons/merge", body, &p); err != nil {
					return fmt.Errorf("merge %q and %q through %s: %w", args[0], args[1], rm.url, err)
				}
				return nil
			}, func() error {
				st, err := openStore(g, writeStore, "spur persons merge")
				if err != nil {
					return err
				}
				defer st.Close()
				if err := st.MergePersons(cmd.Context(), app, args[0], args[1]); err != nil {
					return fmt.Errorf("merge %q and %q in app %q: %w", args[0], args[1], app, err)
				}
				p, err = localPerson(st, app, args[0])
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "merged %s and %s in app %s: ", args[0], args[1], app)
			return printPerson(cmd.OutOrStdout(), p)
		},
	}
	show := &cobra.Command{
		Use:   "show --app APP ID",
		Short: "Print the person id and the distinct ids of the person of distinct id ID",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p personAnswer
			err := either(func() error {
				if err := rm.requestJSON(cmd.Context(), "GET", "api/apps/"+url.PathEscape(app)+"/persons/"+url.PathEscape(args[0]), nil, &p); err != nil {
					return fmt.Errorf("person of %q through %s: %w", args[0], rm.url, err)
				}
				return nil
			}, func() error {
				st, err := openStore(g, readStore, "spur persons show")
				if err != nil {
					return err
				}
				defer st.Close()
				p, err = localPerson(st, app, args[0])
				return err
			})
			if err != nil {
				return err
			}
			return printPerson(cmd.OutOrStdout(), p)
		},
	}
	cmd.AddCommand(merge, show)
	return cmd
}

// localPerson returns the person of distinct id id in app's current
// version of st (a person of its own when the id graph does not hold it).
func localPerson(st *storage.Store, app, id string) (personAnswer, error) {
	a, err := st.App(app)
	if err != nil {
		return personAnswer{}, err
	}
	v, err := a.Acquire()
	if err != nil {
		return personAnswer{}, fmt.Errorf("app %q: %w", app, err)
	}
	defer v.Release()
	if ps := v.Persons(); ps != nil {
		if p := ps.LookupString(id); p != nil {
			return personAnswer{PersonID: p.ID, DistinctIDs: p.DistinctIDs}, nil
		}
	}
	return personAnswer{PersonID: id, DistinctIDs: []string{id}}, nil
}

// printPerson prints "person P: ids A B C".
func printPerson(w io.Writer, p personAnswer) error {
	_, err := fmt.Fprintf(w, "person %s: distinct ids %s\n", p.PersonID, strings.Join(p.DistinctIDs, " "))
	return err
}

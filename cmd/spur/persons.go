package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
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
		Use:   "persons merge|show|delete",
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
	var from string
	var suppress bool
	del := &cobra.Command{
		Use:   "delete --app APP [--suppress] ID… | --from FILE",
		Short: "Erase the persons of distinct ids: every event and property of each of their ids (docs/storage.md §7)",
		Long: `Delete erases a person (GDPR Art. 17): every event and user property write of
every distinct id of the person of each ID is hidden from every query from the
answer on, and its bytes leave every file of the store at ` + "`spur compact --erase`" + `
(or within spur serve's --erase-within). --suppress also drops later events of
those ids. --from reads one id per line (blank lines skipped). Each person is one
request, listed by GET /api/apps/{app}/deletions; a pending request for an id is
answered again.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := args
			if from != "" {
				if len(args) > 0 {
					return errors.New("give ids as arguments or --from FILE, not both")
				}
				b, err := os.ReadFile(from)
				if err != nil {
					return err
				}
				for _, line := range strings.Split(string(b), "\n") {
					if line = strings.TrimSpace(line); line != "" {
						ids = append(ids, line)
					}
				}
			}
			if len(ids) == 0 {
				return errors.New("no id: give distinct ids as arguments or --from FILE")
			}
			var out []deletionAnswer
			err := either(func() error {
				for _, id := range ids {
					var d deletionAnswer
					path := "api/apps/" + url.PathEscape(app) + "/persons/" + url.PathEscape(id)
					if suppress {
						path += "?suppress=true"
					}
					if err := rm.requestJSON(cmd.Context(), "DELETE", path, nil, &d); err != nil {
						return fmt.Errorf("erase %q through %s: %w", id, rm.url, err)
					}
					out = append(out, d)
				}
				return nil
			}, func() error {
				st, err := openLiveStore(g, "spur persons delete")
				if err != nil {
					return err
				}
				defer st.Close()
				dels, err := st.ErasePersons(cmd.Context(), app, ids, suppress)
				if err != nil {
					return fmt.Errorf("erase in app %q: %w", app, err)
				}
				for _, d := range dels {
					out = append(out, deletionAnswer{ID: d.ID, Status: "pending"})
				}
				return st.Close()
			})
			if err != nil {
				return err
			}
			for i, d := range out {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: erasure %s %s\n", ids[i], d.ID, d.Status)
			}
			return nil
		},
	}
	del.Flags().StringVar(&from, "from", "", "file of distinct ids, one per line")
	del.Flags().BoolVar(&suppress, "suppress", false, "also drop the ids' later events at ingestion")
	cmd.AddCommand(merge, show, del)
	return cmd
}

// deletionAnswer is what `spur persons delete` prints of a request.
type deletionAnswer struct {
	ID     string `json:"id"`
	Status string `json:"status"`
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

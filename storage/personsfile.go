package storage

// Persons files (docs/storage.md §8, docs/identity.md §4): `spur export
// --persons` writes one row per distinct id of every person of an app's
// id graph, `{distinct_id, person_id, identified}`; `spur import --persons
// FILE` rebuilds the graph from those rows alone (ImportOptions.Persons),
// the operation rows of the events imported with it then being plain
// events.
//
// The rebuild (docs/decisions.md, "Persons files"): per person, in the
// order its rows come, identify(P, P) once when it is identified, then
// merge(P, D) for each of its other distinct ids D. On an empty graph that
// gives the same persons with the same person ids and identified flags
// (package identity: an identified person's id is the T of the first op
// that marked it, and only identify(P, P) marks; an unidentified person's
// is the T of its first join, and every join's T is P), and with the
// file's person order the same person order (keys are given as ids enter
// the graph), so the new app exports the same persons file. What it does
// not rebuild: the operation sequence (how many operations were recorded)
// and the list of refusals.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
)

// The columns of a persons file (`spur export --persons`): the distinct
// id (the row's user column), its person's id, and whether the person is
// identified (docs/identity.md §1).
const (
	PersonsDistinctIDColumn = "distinct_id"
	PersonsPersonIDColumn   = "person_id"
	PersonsIdentifiedColumn = "identified"
)

// personsOps reads the rows of a persons file from src (each row's
// UserID the distinct id, a string property PersonsPersonIDColumn and an
// optional bool property PersonsIdentifiedColumn, false when absent; other
// properties are ignored) and returns the identity operations that rebuild
// its persons (see the file comment), in row order; the caller owns them.
//
// The file must describe a partition: every distinct id on one row, every
// person id one of its own person's distinct ids (a row whose distinct_id
// and person_id are equal), the rows of a person agreeing on identified.
// Any bad row — a read error, a missing or mistyped column, an invalid id
// (identity.Op.Validate), a row breaking those rules — is an error naming
// the file and row ("persons file: …"); so is ctx.Err(), checked every
// 64 Ki rows. Memory: the ops plus a map entry per distinct id and per
// person while it reads.
func personsOps(ctx context.Context, src Source) ([]identity.Op, error) {
	type person struct {
		id         string // the person id (ours: the row's strings are borrowed)
		identified bool
		self       bool // it has the row of its own id
	}
	ids := map[string]struct{}{}
	persons := map[string]*person{}
	var order []string // person ids, in the order of their first row
	var ops []identity.Op
	var ev event.Event
	bad := func(format string, args ...any) error {
		return fmt.Errorf("persons file: %w", &event.RowError{Pos: ev.Pos, Msg: fmt.Sprintf(format, args...)})
	}
	for n := 1; ; n++ {
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("persons file: %w", err)
			}
		}
		err := src.Next(&ev)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("persons file: %w", err)
		}
		var pid string
		var havePID, identified bool
		for _, p := range ev.Props {
			switch p.Name {
			case PersonsPersonIDColumn:
				if p.Value.Type != event.TypeString {
					return nil, bad("%s is a %s, want a string", PersonsPersonIDColumn, p.Value.Type)
				}
				pid, havePID = p.Value.Str, true
			case PersonsIdentifiedColumn:
				if p.Value.Type != event.TypeBool {
					return nil, bad("%s is a %s, want true or false", PersonsIdentifiedColumn, p.Value.Type)
				}
				identified = p.Value.Int != 0
			}
		}
		if !havePID {
			return nil, bad("no %s", PersonsPersonIDColumn)
		}
		if err := (identity.Op{Kind: identity.Merge, T: pid, O: ev.UserID}).Validate(); err != nil {
			return nil, bad("%s %s / %s %s: %v", PersonsPersonIDColumn, event.Quote(pid), PersonsDistinctIDColumn, event.Quote(ev.UserID), err)
		}
		if _, dup := ids[ev.UserID]; dup {
			return nil, bad("%s %s is on an earlier row too", PersonsDistinctIDColumn, event.Quote(ev.UserID))
		}
		d := strings.Clone(ev.UserID)
		ids[d] = struct{}{}
		p := persons[pid]
		if p == nil {
			p = &person{id: strings.Clone(pid), identified: identified}
			persons[p.id] = p
			order = append(order, p.id)
			if identified {
				ops = append(ops, identity.Op{Kind: identity.Identify, T: p.id, O: p.id})
			}
		} else if p.identified != identified {
			return nil, bad("person %s is %s on an earlier row", event.Quote(pid), identifiedWord(p.identified))
		}
		if d == p.id {
			p.self = true
		} else {
			ops = append(ops, identity.Op{Kind: identity.Merge, T: p.id, O: d})
		}
	}
	for _, pid := range order {
		if !persons[pid].self {
			return nil, fmt.Errorf("persons file: person %s has no row of its own id (%s = %s = %[1]s): a person id is one of its person's distinct ids",
				event.Quote(pid), PersonsDistinctIDColumn, PersonsPersonIDColumn)
		}
	}
	return slices.Clip(ops), nil
}

// identifiedWord is "identified" or "not identified".
func identifiedWord(b bool) string {
	if b {
		return "identified"
	}
	return "not identified"
}

// errPersonsUsers: a users import given a persons file.
var errPersonsUsers = errors.New("import: a users import carries no persons (ImportOptions.Persons is for events imports)")

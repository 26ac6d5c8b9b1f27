package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// Saved cohorts are the documents of the app's "cohorts" collection
// (meta.go), id = cohort name. Stores written before the collection kept
// them in one unchecksummed file, DIR/apps/APP/cohorts.json; reads merge
// it in (a document wins over a legacy entry of the same name) and the
// first write moves its entries into documents and renames it
// cohorts.json.migrated (kept, never deleted).
const (
	// CohortsCollection is the collection of saved cohorts.
	CohortsCollection = "cohorts"
	legacyCohorts     = "cohorts.json"
	legacyCohortsDone = "cohorts.json.migrated"
	legacyCohortsVer  = 1
)

// SavedCohort is a named cohort definition saved in an app (docs/analytics.md §7). It
// stores the condition tree, not its users: a saved cohort is evaluated
// whenever a query uses it, so it is never stale.
type SavedCohort struct {
	// Name matches [a-z0-9][a-z0-9_-]{0,63}.
	Name string `json:"name"`
	// Definition is the cohort condition tree as the docs/analytics.md §9 "cohort"
	// field takes it (validated by the query layer before saving); it is
	// returned compact.
	Definition json.RawMessage `json:"definition"`
	// Description is free text for people.
	Description string `json:"description,omitempty"`
	// SavedAt is when it was last saved, RFC 3339 UTC.
	SavedAt string `json:"saved_at"`
	// Version is the document version (1 when first saved, +1 per save);
	// 0 for a cohort still in a legacy cohorts.json.
	Version int64 `json:"version,omitempty"`
}

// cohortBody is the body of a saved cohort's document (the server's
// cohorts endpoints write the same fields).
type cohortBody struct {
	Definition  json.RawMessage `json:"definition"`
	Description string          `json:"description,omitempty"`
	SavedAt     string          `json:"saved_at"`
}

// ValidCohortName reports whether name is a valid saved cohort name, the
// same rule as app names: [a-z0-9][a-z0-9_-]{0,63}.
func ValidCohortName(name string) bool { return appNameRE.MatchString(name) }

// Cohorts returns the app's saved cohorts sorted by name (newly allocated;
// empty when none were saved). Errors: a corrupt document or legacy file
// (naming it), I/O errors.
func (a *App) Cohorts() ([]SavedCohort, error) {
	col := a.cohorts()
	docs, err := col.List()
	if err != nil {
		return nil, err
	}
	out := make([]SavedCohort, 0, len(docs))
	have := map[string]bool{}
	for _, d := range docs {
		c, err := cohortOf(col, d)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		have[c.Name] = true
	}
	legacy, err := a.readLegacyCohorts()
	if err != nil {
		return nil, err
	}
	for _, c := range legacy {
		if !have[c.Name] {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y SavedCohort) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// Cohort returns the saved cohort name; the error matches ErrNotFound when
// the app has none by that name.
func (a *App) Cohort(name string) (SavedCohort, error) {
	col := a.cohorts()
	d, err := col.Get(name)
	if err == nil {
		return cohortOf(col, d)
	}
	if !errors.Is(err, ErrNotFound) {
		return SavedCohort{}, err
	}
	legacy, lerr := a.readLegacyCohorts()
	if lerr != nil {
		return SavedCohort{}, lerr
	}
	for _, c := range legacy {
		if c.Name == name {
			return c, nil
		}
	}
	return SavedCohort{}, fmt.Errorf("app %q has no saved cohort %q: %w", a.name, name, ErrNotFound)
}

// SaveCohort saves c in the app, replacing a cohort of the same name
// whatever its version, as a checksummed document written atomically.
// Errors: an invalid name, an empty definition, an app that was never
// imported into (ErrNotFound), I/O errors.
func (a *App) SaveCohort(c SavedCohort) error {
	if !ValidCohortName(c.Name) {
		return fmt.Errorf("invalid cohort name %q: want [a-z0-9][a-z0-9_-]{0,63}", c.Name)
	}
	if len(c.Definition) == 0 {
		return errors.New("cohort definition is empty")
	}
	if err := a.MigrateCohorts(); err != nil {
		return err
	}
	b, err := json.Marshal(cohortBody{Definition: c.Definition, Description: c.Description, SavedAt: c.SavedAt})
	if err != nil {
		return fmt.Errorf("cohort %q: %w", c.Name, err)
	}
	_, err = a.cohorts().Put(c.Name, b)
	return err
}

// DeleteCohort removes the saved cohort name; the error matches
// ErrNotFound when there is none.
func (a *App) DeleteCohort(name string) error {
	if err := a.MigrateCohorts(); err != nil {
		return err
	}
	err := a.cohorts().Delete(name, 0)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("app %q has no saved cohort %q: %w", a.name, name, ErrNotFound)
	}
	return err
}

func (a *App) cohorts() *Collection {
	c, _ := a.Collection(CohortsCollection) // a valid constant name
	return c
}

// cohortOf decodes a saved cohort's document strictly.
func cohortOf(col *Collection, d Doc) (SavedCohort, error) {
	var b cohortBody
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || len(b.Definition) == 0 {
		if err == nil {
			err = errors.New("no definition")
		}
		return SavedCohort{}, &CorruptionError{Path: col.path(d.ID), Msg: "saved cohort body: " + err.Error()}
	}
	return SavedCohort{Name: d.ID, Definition: b.Definition, Description: b.Description, SavedAt: b.SavedAt, Version: d.Version}, nil
}

// readLegacyCohorts reads a pre-collection cohorts.json (nil when there
// is none: also in a store without the file Metastore), definitions
// compacted.
func (a *App) readLegacyCohorts() ([]SavedCohort, error) {
	fm, ok := a.store.meta.(*fileMeta)
	if !ok {
		return nil, nil
	}
	b, path, err := fm.legacyCohorts(a.name)
	if err != nil {
		return nil, fmt.Errorf("read saved cohorts: %w", err)
	}
	if b == nil {
		return nil, nil
	}
	var f struct {
		FormatVersion int           `json:"format_version"`
		Cohorts       []SavedCohort `json:"cohorts"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("saved cohorts %s: %w", path, err)
	}
	if f.FormatVersion > legacyCohortsVer {
		return nil, fmt.Errorf("saved cohorts %s: format version %d is newer than this build supports (%d)", path, f.FormatVersion, legacyCohortsVer)
	}
	for i := range f.Cohorts {
		var c bytes.Buffer
		if err := json.Compact(&c, f.Cohorts[i].Definition); err != nil {
			return nil, fmt.Errorf("saved cohorts %s: cohort %q: %w", path, f.Cohorts[i].Name, err)
		}
		f.Cohorts[i].Definition = c.Bytes()
		f.Cohorts[i].Version = 0
	}
	return f.Cohorts, nil
}

// MigrateCohorts moves a legacy cohorts.json into documents of the
// cohorts collection (those not already saved as one) and renames it
// cohorts.json.migrated, under the collection's lock; a caller that works
// on the collection directly calls it first. Without a legacy file it
// does nothing. Errors: a malformed legacy file, I/O errors.
func (a *App) MigrateCohorts() error {
	fm, ok := a.store.meta.(*fileMeta) // only file stores have the legacy file
	if !ok || !fm.hasLegacyCohorts(a.name) {
		return nil
	}
	col := a.cohorts()
	return col.locked(func() error {
		legacy, err := a.readLegacyCohorts() // again, under the lock
		if err != nil || legacy == nil {
			return err
		}
		for _, c := range legacy {
			if _, err := col.read(c.Name); err == nil {
				continue
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if !ValidCohortName(c.Name) || len(c.Definition) == 0 {
				return fmt.Errorf("saved cohorts %s: cohort %q: invalid name or empty definition", legacyCohorts, c.Name)
			}
			b, err := json.Marshal(cohortBody{Definition: c.Definition, Description: c.Description, SavedAt: c.SavedAt})
			if err != nil {
				return err
			}
			now := c.SavedAt
			if _, err := time.Parse(time.RFC3339, now); err != nil {
				now = "1970-01-01T00:00:00.000Z"
			}
			d := Doc{ID: c.Name, Version: 1, Created: now, Updated: now, Body: b}
			if err := a.store.meta.WriteDoc(context.Background(), col.dc, c.Name, encodeDoc(&d)); err != nil {
				return err
			}
		}
		return fm.retireLegacyCohorts(a.name)
	})
}

package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spurdb/spur/storage/vfs"
)

const (
	cohortsName    = "cohorts.json"
	cohortsVersion = 1
)

// SavedCohort is a named cohort definition saved in an app (spec §7). It
// stores the condition tree, not its users: a saved cohort is evaluated
// whenever a query uses it, so it is never stale.
type SavedCohort struct {
	// Name matches [a-z0-9][a-z0-9_-]{0,63}.
	Name string `json:"name"`
	// Definition is the cohort condition tree as the spec §9 "cohort"
	// field takes it (validated by the query layer before saving); it is
	// returned compact.
	Definition json.RawMessage `json:"definition"`
	// Description is free text for people.
	Description string `json:"description,omitempty"`
	// SavedAt is when it was last saved, RFC 3339 UTC.
	SavedAt string `json:"saved_at"`
}

type cohortsFile struct {
	FormatVersion int           `json:"format_version"`
	Cohorts       []SavedCohort `json:"cohorts"`
}

// ValidCohortName reports whether name is a valid saved cohort name, the
// same rule as app names: [a-z0-9][a-z0-9_-]{0,63}.
func ValidCohortName(name string) bool { return appNameRE.MatchString(name) }

// Cohorts returns the app's saved cohorts sorted by name (newly allocated;
// empty when none were saved). Errors: an unreadable or malformed file
// (naming it).
func (a *App) Cohorts() ([]SavedCohort, error) {
	f, err := a.readCohorts() // cohorts.json is replaced by rename: always whole
	if err != nil {
		return nil, err
	}
	return f.Cohorts, nil
}

// Cohort returns the saved cohort name; the error matches ErrNotFound when
// the app has none by that name.
func (a *App) Cohort(name string) (SavedCohort, error) {
	cs, err := a.Cohorts()
	if err != nil {
		return SavedCohort{}, err
	}
	for _, c := range cs {
		if c.Name == name {
			return c, nil
		}
	}
	return SavedCohort{}, fmt.Errorf("app %q has no saved cohort %q: %w", a.name, name, ErrNotFound)
}

// SaveCohort saves c in the app, replacing a cohort of the same name. The
// file DIR/apps/APP/cohorts.json is rewritten atomically (temporary file,
// fsync, rename, directory fsync) under a cross-process lock. Errors: an
// invalid name, an empty definition, an app that was never imported into
// (ErrNotFound), I/O errors.
func (a *App) SaveCohort(c SavedCohort) error {
	if !ValidCohortName(c.Name) {
		return fmt.Errorf("invalid cohort name %q: want [a-z0-9][a-z0-9_-]{0,63}", c.Name)
	}
	if len(c.Definition) == 0 {
		return errors.New("cohort definition is empty")
	}
	return a.updateCohorts(func(f *cohortsFile) error {
		i := slices.IndexFunc(f.Cohorts, func(x SavedCohort) bool { return x.Name == c.Name })
		if i >= 0 {
			f.Cohorts[i] = c
		} else {
			f.Cohorts = append(f.Cohorts, c)
		}
		return nil
	})
}

// DeleteCohort removes the saved cohort name; the error matches
// ErrNotFound when there is none.
func (a *App) DeleteCohort(name string) error {
	return a.updateCohorts(func(f *cohortsFile) error {
		i := slices.IndexFunc(f.Cohorts, func(x SavedCohort) bool { return x.Name == name })
		if i < 0 {
			return fmt.Errorf("app %q has no saved cohort %q: %w", a.name, name, ErrNotFound)
		}
		f.Cohorts = slices.Delete(f.Cohorts, i, i+1)
		return nil
	})
}

// updateCohorts applies change to the cohorts file under the app's
// writer role (a write, like an import: refused while another process
// writes the app) and publishes the result atomically.
func (a *App) updateCohorts(change func(*cohortsFile) error) error {
	if a.Current().Generation == 0 {
		return fmt.Errorf("app %q: %w", a.name, ErrNotFound)
	}
	t, err := a.beginWrite()
	if err != nil {
		return err
	}
	defer t.end()
	f, err := a.readCohorts()
	if err != nil {
		return err
	}
	if err := change(f); err != nil {
		return err
	}
	slices.SortFunc(f.Cohorts, func(x, y SavedCohort) int { return strings.Compare(x.Name, y.Name) })
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(a.store.fs, a.dir, cohortsName, b); err != nil {
		return fmt.Errorf("write saved cohorts: %w", err)
	}
	return nil
}

// readCohorts reads the cohorts file (an empty set when it does not exist).
func (a *App) readCohorts() (*cohortsFile, error) {
	path := filepath.Join(a.dir, cohortsName)
	b, err := vfs.ReadFile(a.store.fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return &cohortsFile{FormatVersion: cohortsVersion, Cohorts: []SavedCohort{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read saved cohorts: %w", err)
	}
	var f cohortsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("saved cohorts %s: %w", path, err)
	}
	if f.FormatVersion > cohortsVersion {
		return nil, fmt.Errorf("saved cohorts %s: format version %d is newer than this build supports (%d)", path, f.FormatVersion, cohortsVersion)
	}
	f.FormatVersion = cohortsVersion
	if f.Cohorts == nil {
		f.Cohorts = []SavedCohort{}
	}
	for i := range f.Cohorts { // the file is indented; hand definitions back compact
		var b bytes.Buffer
		if err := json.Compact(&b, f.Cohorts[i].Definition); err != nil {
			return nil, fmt.Errorf("saved cohorts %s: cohort %q: %w", path, f.Cohorts[i].Name, err)
		}
		f.Cohorts[i].Definition = b.Bytes()
	}
	return &f, nil
}

package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// AppDeleted is what DeleteApp removed: the app's files and bytes
// (storage.DeletedApp) and the number of its keys revoked.
type AppDeleted struct {
	*storage.DeletedApp
	// KeysRevoked counts the app's ingest and query keys revoked.
	KeysRevoked int `json:"keys_revoked"`
}

// DeleteApp revokes app name's keys in ks, then removes the app whole
// from st (storage.Store.DeleteApp: st must hold the writer role), so
// that when it returns the app's directory is gone and its keys answer
// 401 (docs/storage.md §7, "An app"). Errors: storage.ErrNotFound for an
// unknown app (no key is revoked then), the keys' and the store's.
func DeleteApp(ctx context.Context, st *storage.Store, ks *Keys, name string) (*AppDeleted, error) {
	if _, err := st.App(name); errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	revoked := 0
	for _, k := range ks.List() {
		if k.App != name {
			continue
		}
		if err := ks.Revoke(k.ID); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
		revoked++
	}
	d, err := st.DeleteApp(ctx, name)
	if err != nil {
		return nil, err
	}
	return &AppDeleted{DeletedApp: d, KeysRevoked: revoked}, nil
}

// handleDeleteApp is DELETE /api/apps/{app} (admin; docs/storage.md §7,
// "An app"): DeleteApp, then the server forgets what it caches of the
// app (its schema, its capture warnings). Events sent to the name
// afterwards (with an admin key) start a new app. 200 {"app", "files",
// "bytes", "keys_revoked"}; 404 not_found for an unknown app.
func (s *Server) handleDeleteApp(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("app")
	if !storage.ValidAppName(name) {
		writeError(w, notFoundApp(name))
		return
	}
	d, err := DeleteApp(r.Context(), s.store, s.keys, name)
	if err != nil {
		s.appFailed(w, r, name, err)
		return
	}
	s.schemaMu.Lock()
	delete(s.schemas, name)
	s.schemaMu.Unlock()
	s.captureWarns.forget(name)
	s.log.Info("app deleted", "app", name, "files", d.Files, "bytes", d.Bytes, "keys_revoked", d.KeysRevoked)
	writeJSON(w, http.StatusOK, d)
}

// AppSettings is the answer of PATCH /api/apps/{app}: the app's settings
// after the change.
type AppSettings struct {
	App    string `json:"app"`
	TZ     string `json:"tz"`     // the default time zone (IANA); "" = UTC
	Shards int    `json:"shards"` // the shard count
	// Retention is the events' retention as storage.FormatRetention
	// writes it ("400d", "36h", "none"; docs/storage.md §7).
	Retention string `json:"retention"`
}

// AppSettingsOf returns the settings of catalog c.
func AppSettingsOf(c *storage.Catalog) AppSettings {
	return AppSettings{App: c.App, TZ: c.TZ, Shards: c.Shards, Retention: storage.FormatRetention(c.Retention)}
}

// appPatch is the body of PATCH /api/apps/{app}: the settings to change
// (so far only the retention).
type appPatch struct {
	Retention *string `json:"retention"`
}

// handlePatchApp is PATCH /api/apps/{app} (admin; docs/storage.md §7,
// "Retention"): {"retention": "400d"} sets the app's retention (days
// "400d", hours "36h", or "none" to keep everything;
// storage.ParseRetention), effective for every query from the answer on.
// 200 AppSettings; 400 invalid_query for a bad body or retention; 404
// not_found for an unknown app.
func (s *Server) handlePatchApp(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("app")
	if !storage.ValidAppName(name) {
		writeError(w, notFoundApp(name))
		return
	}
	var p appPatch
	if !readStrict(w, r, &p) {
		return
	}
	if p.Retention == nil {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "retention",
			Message: `nothing to change: want {"retention": "400d"} (or "none")`})
		return
	}
	d, err := storage.ParseRetention(*p.Retention)
	if err != nil {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "retention", Message: err.Error()})
		return
	}
	c, err := s.store.SetRetention(r.Context(), name, d)
	if err != nil {
		s.appFailed(w, r, name, err)
		return
	}
	s.log.Info("app settings changed", "app", name, "retention", storage.FormatRetention(c.Retention))
	writeJSON(w, http.StatusOK, AppSettingsOf(c))
}

// appFailed answers a failed operation on app name: 404 not_found when
// the app does not exist (storage.ErrNotFound), else as internal.
func (s *Server) appFailed(w http.ResponseWriter, r *http.Request, name string, err error) {
	if errors.Is(err, storage.ErrNotFound) {
		writeError(w, notFoundApp(name))
		return
	}
	s.internal(w, r, err)
}

package server

import (
	"context"
	"errors"
	"net/http"

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
	if errors.Is(err, storage.ErrNotFound) {
		writeError(w, notFoundApp(name))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.schemaMu.Lock()
	delete(s.schemas, name)
	s.schemaMu.Unlock()
	s.captureWarns.forget(name)
	s.log.Info("app deleted", "app", name, "files", d.Files, "bytes", d.Bytes, "keys_revoked", d.KeysRevoked)
	writeJSON(w, http.StatusOK, d)
}

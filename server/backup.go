package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/spurdb/spur/storage"
)

// maxBackupBody bounds the body of POST /api/backup.
const maxBackupBody = 64 << 10

// handleBackup is POST /api/backup (admin; docs/api.md, docs/storage.md §8):
// the body {"to": DIR, "copy": false} names a directory on the server's
// own filesystem, absolute, empty or holding an earlier backup; the
// server writes a consistent snapshot of the whole store into it
// (storage.Store.Backup: one version per app — every event acknowledged
// before the request — its segment files hard-linked there or copied,
// with "copy" always copied, and its live events' write-ahead-log
// records copied) while it keeps taking writes, and answers the
// storage.BackupReport (apps, files linked, copied, kept and removed,
// bytes, duration). Errors: 400 invalid_input for a bad body or an
// unsuitable directory (field "to"), 409 conflict while another backup
// writes into that directory, 500 for a failure (the directory is then
// marked incomplete).
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	bad := func(field, format string, args ...any) {
		writeError(w, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	b, err := readLimited(w, r, maxBackupBody)
	if err != nil {
		writeError(w, err.(answerError).e)
		return
	}
	var body struct {
		To   *string `json:"to"`
		Copy bool    `json:"copy"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		if err == nil {
			err = errors.New("data after the object")
		}
		bad("body", `want {"to": DIR, "copy": false}: %v`, err)
		return
	}
	if body.To == nil || !filepath.IsAbs(*body.To) {
		bad("to", `want "to": an absolute directory path on the server's filesystem`)
		return
	}
	rep, err := s.store.Backup(r.Context(), filepath.Clean(*body.To), storage.BackupOptions{Copy: body.Copy, Holder: "spur serve (POST /api/backup)"})
	switch {
	case errors.Is(err, storage.ErrBackupDir):
		bad("to", "%v", err)
		return
	case errors.Is(err, storage.ErrLocked):
		writeError(w, &apiError{Status: http.StatusConflict, Code: CodeConflict, Field: "to", Message: err.Error()})
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	s.log.Info("backup written", "to", rep.Dir, "apps", len(rep.Apps), "linked", rep.FilesLinked, "copied", rep.FilesCopied,
		"kept", rep.FilesKept, "removed", rep.FilesRemoved, "log_records", rep.LogRecords, "ms", rep.DurationMS)
	writeJSON(w, http.StatusOK, rep)
}

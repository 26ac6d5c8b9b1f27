package storage

// Retention (docs/storage.md §7): a per-app limit on the age of events,
// from the store's clock (Config.Now). Queries never see events older
// than it (Scan clamps ScanSpec.From of events scans, UserEvents skips
// them), live ingestion rejects them (field "timestamp"), imports skip
// them with a count (ImportReport.Expired), and compaction drops whole
// events segments past it and the expired rows of the segments it
// rewrites. User property writes are not events and are kept; so are
// identity merges.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bounds of a retention (ParseRetention, App.SetRetention).
const (
	MinRetention = time.Hour
	MaxRetention = 100 * 365 * 24 * time.Hour
)

// ParseRetention parses a retention as `spur apps set --retention` and
// PATCH /api/apps/{app} take it: "none" (or "") for none, which is 0; a
// whole number of days "400d"; or a Go duration with h, m or s units
// ("36h", "90m"). It must lie within [MinRetention, MaxRetention].
func ParseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return 0, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days <= 0 || days > int64(MaxRetention/(24*time.Hour)) {
			return 0, fmt.Errorf("retention %q: want a positive whole number of days (400d), hours (36h) or none", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("retention %q: want days (400d), hours (36h) or none", s)
		}
	}
	if err := checkRetention(d); err != nil {
		return 0, fmt.Errorf("retention %q: %w", s, err)
	}
	return d, nil
}

// checkRetention checks a retention: 0 (none) or within [MinRetention,
// MaxRetention].
func checkRetention(d time.Duration) error {
	if d != 0 && (d < MinRetention || d > MaxRetention) {
		return fmt.Errorf("%v is outside [%v, %v] (or none)", d, MinRetention, MaxRetention)
	}
	return nil
}

// FormatRetention renders a retention as ParseRetention reads it: "none"
// for 0, whole days as "400d", whole hours as "36h", else Go's form.
func FormatRetention(d time.Duration) string {
	switch {
	case d == 0:
		return "none"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.String()
}

// now returns the store's clock (Config.Now).
func (s *Store) now() time.Time { return s.cfg.Now() }

// expiredBefore returns the time (UTC µs) before which catalog c's events
// are past its retention at now, exactly; ok is false when c has no
// retention.
func expiredBefore(c *Catalog, now time.Time) (int64, bool) {
	if c.Retention <= 0 {
		return math.MinInt64, false
	}
	return now.Add(-c.Retention).UnixMicro(), true
}

// RetainedFrom returns the earliest event time (UTC µs) the version's
// queries see: the store's clock minus the app's retention, rounded up to
// a whole minute (so that answers cached by the minute never show an
// expired event), or math.MinInt64 when the app keeps everything. Events
// before it are hidden from Scan and UserEvents.
func (v *Version) RetainedFrom() int64 { return retainedFrom(v.Catalog, v.app.store.now()) }

// RetainedFrom is Version.RetainedFrom of the app's current version: a
// cache of query answers keys them by it (it moves with the clock).
func (a *App) RetainedFrom() int64 { return retainedFrom(a.published(), a.store.now()) }

// retainedFrom is Version.RetainedFrom of catalog c at now.
func retainedFrom(c *Catalog, now time.Time) int64 {
	from, ok := expiredBefore(c, now)
	if !ok {
		return math.MinInt64
	}
	const minute = int64(time.Minute / time.Microsecond)
	if r := from % minute; r != 0 {
		from += minute - r
		if r < 0 {
			from -= minute
		}
	}
	return from
}

// SetRetention sets the retention of app appName (docs/storage.md §7): d
// is 0 (keep everything) or within [MinRetention, MaxRetention]. It
// publishes a catalog with the new setting (from then on queries see only
// events newer than the clock minus d) and returns it; the expired
// segments are dropped by the next compaction (App.Compact) or the
// server's background maintenance. Errors: an app that does not exist
// (ErrNotFound), a retention out of range, a locked app (*LockedError),
// I/O errors.
func (s *Store) SetRetention(ctx context.Context, appName string, d time.Duration) (*Catalog, error) {
	if err := checkRetention(d); err != nil {
		return nil, fmt.Errorf("app %q: retention %w", appName, err)
	}
	a, err := s.App(appName)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, err := a.beginWrite()
	if err != nil {
		return nil, err
	}
	defer t.end()
	if t.base.Retention == d && t.base.Generation > 0 {
		return t.base, nil
	}
	next := t.base.clone()
	next.Retention = d
	if err := t.publish(next); err != nil {
		return nil, fmt.Errorf("app %q: set retention: %w", appName, err)
	}
	s.log.Info("retention set", "app", appName, "retention", FormatRetention(d), "generation", next.Generation)
	return next, nil
}

// expiredSegments returns the events segments of c whose every row is
// before cut.
func expiredSegments(c *Catalog, cut int64) map[string]bool {
	var out map[string]bool
	for _, ref := range c.Segments {
		if ref.Kind == KindEvents && ref.MaxTime < cut {
			if out == nil {
				out = map[string]bool{}
			}
			out[ref.File] = true
		}
	}
	return out
}

// expire drops the app's events segments wholly past its retention
// (docs/storage.md §7): a catalog without them is published first, then
// their files are removed as every replaced file is, once no version
// pins them. It returns the segments dropped and their rows and bytes,
// and does nothing (no lock taken) when the app has no retention or no
// such segment.
func (a *App) expire(ctx context.Context) (segs int, rows, bytes int64, err error) {
	cur := a.published()
	cut, ok := expiredBefore(cur, a.store.now())
	if !ok || len(expiredSegments(cur, cut)) == 0 {
		return 0, 0, 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, 0, err
	}
	t, err := a.beginWrite()
	if err != nil {
		return 0, 0, 0, err
	}
	defer t.end()
	base := t.base
	cut, ok = expiredBefore(base, a.store.now())
	drop := expiredSegments(base, cut)
	if !ok || len(drop) == 0 {
		return 0, 0, 0, nil
	}
	next := base.clone()
	next.Segments = next.Segments[:0]
	for _, ref := range base.Segments {
		if drop[ref.File] {
			segs, rows, bytes = segs+1, rows+ref.Rows, bytes+ref.Bytes
			continue
		}
		next.Segments = append(next.Segments, ref)
	}
	if err := t.publish(next); err != nil {
		return 0, 0, 0, fmt.Errorf("app %q: drop expired segments: %w", a.name, err)
	}
	a.store.log.Info("expired segments dropped", "app", a.name, "retention", FormatRetention(base.Retention),
		"segments", segs, "rows", rows, "bytes", bytes, "generation", next.Generation)
	return segs, rows, bytes, nil
}

// ExpireInterval is how often a Store with live ingestion (spur serve)
// drops the events segments of its apps wholly past their retention.
const ExpireInterval = time.Minute

// expireLoop runs expireApps every ExpireInterval until expireStop is
// closed.
func (s *Store) expireLoop() {
	defer close(s.expireDone)
	tick := time.NewTicker(ExpireInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.expireStop:
			return
		case <-tick.C:
		}
		s.expireApps(context.Background())
	}
}

// expireApps drops, in every app of the store, the events segments wholly
// past the app's retention (App.expire): the server's background part of
// docs/storage.md §7. Failures are logged; the next round retries.
func (s *Store) expireApps(ctx context.Context) {
	names, err := s.Apps()
	if err != nil {
		s.log.Error("retention: list the apps (retried in a minute)", "err", err)
		return
	}
	for _, name := range names {
		a, err := s.App(name)
		if err != nil {
			s.log.Debug("retention: app not opened", "app", name, "err", err)
			continue
		}
		if _, _, _, err := a.expire(ctx); err != nil && !errors.Is(err, ErrAppDeleted) {
			s.log.Error("retention: dropping expired segments failed (retried in a minute)", "app", name, "err", err)
		}
	}
}

package query

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/trail"
)

// DefaultMemoryBudget is the per-query memory budget when
// Config.MemoryBudget is 0: 2 GiB.
const DefaultMemoryBudget int64 = 2 << 30

// budgetStep is how much an accumulator grows (bytes) before its worker
// charges the growth to the shared budget (one atomic add per step, never
// per event).
const budgetStep = 1 << 20

// errBudget is the cancellation cause of a scan stopped by the budget.
var errBudget = errors.New("memory budget exceeded")

// budget accounts a query's big state (docs/analytics.md §8): duration lists, value
// lists for exact percentiles, per-user counts, listed user ids,
// breakdown tables and dictionaries. Workers charge it as their
// accumulators grow; a breach cancels the scan (cancel) and the query
// fails with limit_exceeded.
type budget struct {
	limit  int64
	used   atomic.Int64
	peak   atomic.Int64
	cancel context.CancelCauseFunc // set while a scan runs
}

func newBudget(limit int64) *budget {
	if limit <= 0 {
		limit = DefaultMemoryBudget
	}
	return &budget{limit: limit}
}

// charge adds n bytes (may be negative) and returns a limit_exceeded
// *Error when the budget is exceeded (cancelling a running scan).
func (b *budget) charge(n int64) error {
	u := b.used.Add(n)
	for {
		pk := b.peak.Load()
		if u <= pk || b.peak.CompareAndSwap(pk, u) {
			break
		}
	}
	if u > b.limit {
		if b.cancel != nil {
			b.cancel(errBudget)
		}
		return b.exceeded()
	}
	return nil
}

func (b *budget) exceeded() *Error {
	return &Error{Code: CodeLimitExceeded, Err: errBudget,
		Message: fmt.Sprintf("query memory budget of %d bytes exceeded (it would hold at least %d bytes); narrow the range, breakdown or list, or raise the budget", b.limit, b.used.Load())}
}

// accumulator is what a visitor feeds: an analysis accumulator
// (*analysis.Funnel, *analysis.Trend, …) or a small type of this package
// around one (cohortUsers, trendLister, trendSet). Add takes a trail
// (or a chunk of one) borrowed for the call; Bytes returns the memory
// the accumulator holds, in bytes. Accumulators are methods on types, not
// closures: Add then takes one indirect call per trail, where a closure
// behind a method-value wrapper took two (funnel4 at 100M: 1.047 →
// 1.012× session 7's CPU with this change, bench/ab.sh 8 rounds).
type accumulator interface {
	Add(t *trail.Trail)
	Bytes() int64
}

// visitor feeds admitted trails to one worker's accumulator and charges
// its growth to the budget.
type visitor struct {
	adm      admission
	acc      accumulator
	reported int64
}

// Visit implements storage.Visitor.
func (v *visitor) Visit(_ storage.UserKey, t *trail.Trail) {
	if !v.adm.admit(t) {
		return
	}
	v.acc.Add(t)
	if n := v.acc.Bytes(); n-v.reported >= budgetStep {
		v.adm.p.budget.charge(n - v.reported) // a breach cancels the scan
		v.reported = n
	}
}

// scanVisitor returns v as the scan is to see it: with a cohort filter, a
// storage.PrepassVisitor (the cohort needs a user's whole trail before the
// analysis may see it).
func (v *visitor) scanVisitor() storage.Visitor {
	if v.adm.cohort != nil {
		return prepassVisitor{v}
	}
	return v
}

// prepassVisitor is a visitor with a cohort filter.
type prepassVisitor struct{ *visitor }

// Prepass implements storage.PrepassVisitor.
func (v prepassVisitor) Prepass(_ storage.UserKey, t *trail.Trail) { v.adm.prepass(t) }

// flush charges the growth not yet reported.
func (v *visitor) flush() error {
	n := v.acc.Bytes()
	err := v.adm.p.budget.charge(n - v.reported)
	v.reported = n
	return err
}

package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/sync/semaphore"
)

// DefaultAdmissionWait is how long a query waits for memory when the
// process-wide total is taken, unless its own deadline comes first.
const DefaultAdmissionWait = 10 * time.Second

// Admission bounds the memory of the queries running at once in a
// process (docs/storage.md §5): each query reserves its whole memory budget
// (bytes) before it starts and returns it when it ends, and the
// reservations never add up to more than the total. A query whose budget
// does not fit waits, first come first served (a large query is not
// overtaken by small ones, golang.org/x/sync/semaphore), for at most the
// admission's wait and never past its own deadline; then it fails with
// code unavailable. So 16 queries of 2 GiB under a total of 12 GiB run 6
// at a time. An Admission is safe for concurrent use; share one per
// process.
type Admission struct {
	total    int64
	wait     time.Duration
	sem      *semaphore.Weighted
	reserved atomic.Int64
	waiting  atomic.Int64
	onChange func(reserved int64) // SetOnChange
	changeMu sync.Mutex           // serializes onChange calls
}

// SetOnChange makes the Admission call f with the bytes reserved after
// every reservation and release; calls are serialized and each passes the
// value current when it is made, so the last call has the latest. Set it
// before the first Acquire (nil: no calls); spur serve keeps the Go
// heap's soft limit at its other budgets plus what queries reserved.
func (a *Admission) SetOnChange(f func(reserved int64)) { a.onChange = f }

// NewAdmission returns an Admission of total bytes (> 0) whose queries
// wait at most wait for memory (≤ 0 means DefaultAdmissionWait).
func NewAdmission(total int64, wait time.Duration) *Admission {
	if wait <= 0 {
		wait = DefaultAdmissionWait
	}
	return &Admission{total: total, wait: wait, sem: semaphore.NewWeighted(total)}
}

// Total returns the admission's total in bytes.
func (a *Admission) Total() int64 { return a.total }

// Reserved returns the bytes reserved by running queries now.
func (a *Admission) Reserved() int64 { return a.reserved.Load() }

// Waiting returns the number of queries waiting for memory now.
func (a *Admission) Waiting() int64 { return a.waiting.Load() }

// Acquire reserves n bytes for one query, waiting as the type's doc says,
// and returns the function that gives them back (call it once, when the
// query has released its memory). Errors: an *Error with code unavailable
// when n is more than the total or the wait ran out (also when ctx's
// deadline ended the wait); ctx.Err() when ctx was cancelled.
func (a *Admission) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if n > a.total {
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
			"the query's memory budget of %s is more than all queries may hold together (--query-memory-total %s)",
			humanize.IBytes(uint64(n)), humanize.IBytes(uint64(a.total)))}
	}
	if !a.sem.TryAcquire(n) {
		a.waiting.Add(1)
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, a.wait)
		err := a.sem.Acquire(wctx, n)
		cancel()
		a.waiting.Add(-1)
		switch {
		case err == nil:
		case errors.Is(ctx.Err(), context.Canceled):
			return nil, ctx.Err()
		default:
			return nil, &Error{Code: CodeUnavailable, Err: err, Message: fmt.Sprintf(
				"no memory for the query: running queries hold %s of the %s all queries may hold together, and %s did not free %s for it; retry later or ask for less with \"limits\": {\"memory\": …}",
				humanize.IBytes(uint64(a.reserved.Load())), humanize.IBytes(uint64(a.total)),
				time.Since(start).Round(time.Millisecond), humanize.IBytes(uint64(n)))}
		}
	}
	a.reserved.Add(n)
	a.changed()
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			a.reserved.Add(-n)
			a.changed()
			a.sem.Release(n)
		}
	}, nil
}

// ParseBytes parses a memory size: a number and an optional unit, IEC
// (KiB, MiB, GiB, TiB: powers of 1024) or SI (kB, MB, GB, TB: powers of
// 1000), case-insensitive, space allowed ("256MiB", "2 GiB", "1.5GB",
// "1048576"), as github.com/dustin/go-humanize reads them. It returns the
// bytes, or an error for anything else, for 0 and for sizes of 8 EiB or
// more.
func ParseBytes(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("want a size such as 256MiB or 2GiB, found %q", s)
	case n == 0:
		return 0, fmt.Errorf("want a size above 0, found %q", s)
	case n >= 1<<63:
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(n), nil
}

func (a *Admission) changed() {
	if a.onChange == nil {
		return
	}
	a.changeMu.Lock()
	defer a.changeMu.Unlock()
	a.onChange(a.reserved.Load())
}

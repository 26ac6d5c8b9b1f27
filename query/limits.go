package query

import (
	"time"

	"github.com/dustin/go-humanize"
)

// Limits asks for tighter limits than the engine's for one query (docs/analytics.md
// §9): Timeout a duration ("5s", "2m"; ParseDuration) and Memory a size
// ("256MiB"; ParseBytes). Empty fields keep the engine's. A looser limit
// is an invalid_query naming limits.timeout or limits.memory.
type Limits struct {
	Timeout string `json:"timeout,omitempty"`
	Memory  string `json:"memory,omitempty"`
}

// limits is a query's effective time limit (0: none) and memory budget
// in bytes.
type limits struct {
	timeout time.Duration
	memory  int64
}

// limits returns the engine's limits tightened by the query's.
func (e *Engine) limits(q *Query) (limits, error) {
	l := limits{timeout: e.cfg.Timeout, memory: e.cfg.MemoryBudget}
	if l.memory <= 0 {
		l.memory = DefaultMemoryBudget
	}
	if l.timeout < 0 {
		l.timeout = 0
	}
	if q.Limits == nil {
		return l, nil
	}
	if s := q.Limits.Timeout; s != "" {
		us, err := ParseDuration(s)
		if err != nil || us < second {
			return l, invalid("limits.timeout", "want a duration of at least 1s such as \"5s\" or \"2m\", found %q", s)
		}
		t := time.Duration(us) * time.Microsecond
		if l.timeout > 0 && t > l.timeout {
			return l, invalid("limits.timeout", "%s is longer than the server's query time limit of %s; a query may only ask for a tighter limit", s, l.timeout)
		}
		l.timeout = t
	}
	if s := q.Limits.Memory; s != "" {
		n, err := ParseBytes(s)
		if err != nil {
			return l, invalid("limits.memory", "%v", err)
		}
		if n > l.memory {
			return l, invalid("limits.memory", "%s is more than the server's query memory budget of %s; a query may only ask for a tighter limit", s, humanize.IBytes(uint64(l.memory)))
		}
		l.memory = n
	}
	return l, nil
}

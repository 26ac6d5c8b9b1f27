package storage

import (
	"fmt"
	"slices"
	"sync"

	"github.com/spurdb/spur/trail"
)

// chunkChecker is a Visitor (and, with prepass, a PrepassVisitor) that
// checks the scan's chunk protocol (package trail, PrepassVisitor) and
// hands each user's reassembled whole trail to inner: a user's chunks
// arrive consecutively, with Offset counting the earlier chunks' events
// and More on all but the last, never splitting a group of equal
// timestamps; with prepass, a trail of several chunks comes through
// Prepass first, then the same chunks again through Visit. Problems are
// collected in errs (visitors run on scan goroutines).
type chunkChecker struct {
	inner   func(UserKey, *trail.Trail)
	prepass bool
	mu      *sync.Mutex
	errs    *[]string

	user  string      // the user whose chunks are arriving
	phase int         // 0 between users, 1 in Prepass, 2 in Visit
	pre   trail.Trail // the trail seen through Prepass
	acc   trail.Trail // the trail being reassembled
}

// chunkPrepass wraps a chunkChecker that is a PrepassVisitor.
type chunkPrepass struct{ *chunkChecker }

func (c chunkPrepass) Prepass(u UserKey, t *trail.Trail) { c.chunk(u, t, 1) }

func newChunkVisitors(n int, prepass bool, mu *sync.Mutex, errs *[]string, inner func(UserKey, *trail.Trail)) []Visitor {
	vs := make([]Visitor, n)
	for i := range vs {
		c := &chunkChecker{inner: inner, prepass: prepass, mu: mu, errs: errs}
		if prepass {
			vs[i] = chunkPrepass{c}
		} else {
			vs[i] = c
		}
	}
	return vs
}

func (c *chunkChecker) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.errs = append(*c.errs, fmt.Sprintf(format, args...))
}

func (c *chunkChecker) Visit(u UserKey, t *trail.Trail) { c.chunk(u, t, 2) }

func (c *chunkChecker) chunk(u UserKey, t *trail.Trail, phase int) {
	id := string(u.ID)
	if t.Offset == 0 {
		switch {
		case phase == 2 && c.phase == 1 && id == c.user:
			if c.acc.More {
				c.fail("user %s: Visit before the last Prepass chunk", id)
			}
			c.pre, c.acc = c.acc, trail.Trail{}
		case c.phase != 0:
			c.fail("user %s: a new trail while user %s's is unfinished", id, c.user)
		}
		if phase == 1 && !t.More {
			c.fail("user %s: Prepass with a trail of one chunk", id)
		}
		if phase == 2 && t.More && c.prepass && c.phase != 1 {
			c.fail("user %s: a trail of several chunks without a Prepass", id)
		}
		c.user, c.phase = id, phase
		c.acc = trail.Trail{User: slices.Clone(t.User), ID: []byte(id), Cols: make([]trail.Column, len(t.Cols))}
	} else if id != c.user || phase != c.phase {
		c.fail("user %s phase %d: chunk at offset %d inside user %s's trail (phase %d)", id, phase, t.Offset, c.user, c.phase)
		return
	}
	if t.Offset != len(c.acc.Times) {
		c.fail("user %s: chunk at offset %d after %d events", id, t.Offset, len(c.acc.Times))
	}
	if len(t.Times) == 0 && (t.More || t.Offset > 0) {
		c.fail("user %s: an empty chunk in a trail of several", id)
	}
	if n := len(c.acc.Times); n > 0 && len(t.Times) > 0 && c.acc.Times[n-1] == t.Times[0] {
		c.fail("user %s: chunks split the group of events at %d", id, t.Times[0])
	}
	c.acc.Times = append(c.acc.Times, t.Times...)
	c.acc.Mask = append(c.acc.Mask, t.Mask[:len(t.Times)]...)
	for j, col := range t.Cols {
		c.acc.Cols[j].Set = append(c.acc.Cols[j].Set, col.Set...)
		c.acc.Cols[j].Bits = append(c.acc.Cols[j].Bits, col.Bits...)
	}
	c.acc.More = t.More
	if t.More {
		return
	}
	if phase == 1 {
		return // the Visit chunks follow
	}
	if c.pre.Times != nil && !slices.Equal(c.pre.Times, c.acc.Times) {
		c.fail("user %s: Visit saw other events than Prepass", id)
	}
	c.phase, c.pre = 0, trail.Trail{}
	whole := c.acc
	whole.More = false
	c.inner(u, &whole)
}

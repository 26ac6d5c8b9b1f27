package analysis

import (
	"fmt"
	"slices"

	"github.com/spurdb/spur/trail"
)

// LifecycleStatus is a user's status in a lifecycle bucket (docs/analytics.md §14).
type LifecycleStatus uint8

// Lifecycle statuses, in result order.
const (
	LifecycleNew          LifecycleStatus = iota // active in b, and b holds the user's first event
	LifecycleReturning                           // active in b and in the bucket before, not new
	LifecycleResurrecting                        // active in b, not in the bucket before, not new
	LifecycleDormant                             // active in the bucket before b, not in b
	nLifecycleStatus
)

var lifecycleNames = []string{"new", "returning", "resurrecting", "dormant"}

// String returns the query-language name of s ("new", "returning",
// "resurrecting", "dormant").
func (s LifecycleStatus) String() string { return enumString(lifecycleNames, uint8(s), "status") }

// ParseLifecycleStatus parses a status name; other input (the empty
// string included) returns an error listing the accepted names.
func ParseLifecycleStatus(s string) (LifecycleStatus, error) {
	v, err := enumParse(lifecycleNames, s, "lifecycle status", false)
	return LifecycleStatus(v), err
}

// LifecycleSpec is a validated lifecycle query for the kernel (docs/analytics.md §14,
// PostHog's lifecycle with "new" meaning first seen).
type LifecycleSpec struct {
	// Bounds are calendar boundaries (UTC µs, strictly increasing): the
	// start of the bucket before the range (history, read only to classify
	// the first bucket), then the boundaries of the N ≥ 1 buckets covering
	// [From, To), i.e. timebucket.Bounds(From, To, …) with the previous
	// bucket's start prepended. Bucket 0 is the history bucket, buckets
	// 1..N are reported (as 0..N-1).
	Bounds []int64
	// From, To (UTC µs): activity in buckets 1..N counts events in
	// [From, To) only (docs/analytics.md §2); the history bucket counts all its events.
	From, To int64
	// Active is the mask bit of the activity matcher; Seen the bit of a
	// matcher of every event of the app ($any without filters), whose
	// first event in the trail is the user's first event. They may be the
	// same bit. The trail must hold the user's events from the first one
	// on (a scan from the beginning of the data).
	Active, Seen int
	// Breakdown is KeyNone or KeyUser (a status belongs to a user).
	Breakdown KeySource
	// Group, if set, gives the key each breakdown key is counted under,
	// or drops the user (see KeyGroup).
	Group *KeyGroup
	// List, if not nil, selects users to list.
	List *LifecycleList
}

// LifecycleList selects the users of one status in one reported bucket
// (0-based, 0..N-1) under group key Key (the zero Key without a
// breakdown). Keep is the number of ids kept.
type LifecycleList struct {
	Bucket int
	Status LifecycleStatus
	Key    Key
	Keep   int
}

// LifecycleGroup is the table of one breakdown key: Counts[b][s] is the
// number of users with status s in reported bucket b (dormant as a
// positive count).
type LifecycleGroup struct {
	Key    Key
	Counts [][4]int64
}

// LifecycleResult is the result of a Lifecycle: groups by key
// (compareKeys); without a breakdown exactly one, with the zero Key.
type LifecycleResult struct {
	Groups []LifecycleGroup
	List   *UserList // the listed users (nil without a list); points into the accumulator
}

// lifeState is the mergeable state of a Lifecycle: what Merge combines
// and AppendBinary writes (the current user's words are scratch).
type lifeState struct {
	groups keyGroups
	counts [][][4]int64 // per group, per bucket 1..N (index b-1)
	list   UserList
}

// Lifecycle accumulates lifecycle counts per bucket and breakdown key.
// Create it with NewLifecycle; it is owned by one goroutine. Add takes a
// user's trail in one or more chunks (package trail); between chunks it
// keeps a few words per user.
type Lifecycle struct {
	spec   LifecycleSpec
	nb     int // reported buckets N
	active uint64
	seen   uint64
	idx    bucketIndex
	lifeState
	bytes int64

	// current user (scratch)
	g        int32 // group, -1 dropped
	seenB    int32 // bucket holding the first event: -1 before Bounds[0], -2 not seen yet
	last     int32 // last active bucket (0 = history), -1 none
	listedID bool
}

// NewLifecycle validates spec and returns an empty accumulator. It copies
// spec.Bounds. Errors: empty range, fewer than three or non-increasing
// boundaries, boundaries not covering [From, To) from the second on, bits
// out of range, an event breakdown, a list out of range.
func NewLifecycle(spec LifecycleSpec) (*Lifecycle, error) {
	if len(spec.Bounds) < 3 {
		return nil, fmt.Errorf("analysis: lifecycle: %d boundaries, want the history bucket and at least one more", len(spec.Bounds))
	}
	if err := checkBounds("lifecycle", spec.Bounds[1:], spec.From, spec.To); err != nil {
		return nil, err
	}
	if spec.Bounds[0] >= spec.Bounds[1] {
		return nil, fmt.Errorf("analysis: lifecycle: history bucket [%d, %d) empty", spec.Bounds[0], spec.Bounds[1])
	}
	if spec.Active < 0 || spec.Active > 63 || spec.Seen < 0 || spec.Seen > 63 {
		return nil, fmt.Errorf("analysis: lifecycle: bits %d, %d out of range", spec.Active, spec.Seen)
	}
	if spec.Breakdown.From == KeyEvent {
		return nil, fmt.Errorf("analysis: lifecycle: an event breakdown (a status belongs to a user)")
	}
	nb := len(spec.Bounds) - 2
	if l := spec.List; l != nil && (l.Bucket < 0 || l.Bucket >= nb || l.Status >= nLifecycleStatus || l.Keep < 0 || l.Keep > MaxListKeep) {
		return nil, fmt.Errorf("analysis: lifecycle: list (bucket %d, status %d, keep %d) out of range", l.Bucket, l.Status, l.Keep)
	}
	spec.Bounds = slices.Clone(spec.Bounds)
	c := &Lifecycle{spec: spec, nb: nb, active: 1 << spec.Active, seen: 1 << spec.Seen, idx: newBucketIndex(spec.Bounds)}
	c.groups.group = newKeyGrouper(spec.Group)
	if spec.List != nil {
		c.list.Keep = spec.List.Keep
	}
	if spec.Group == nil && spec.Breakdown.From == KeyNone {
		c.group(Key{})
	}
	return c, nil
}

// group returns the group of raw key k (-1: dropped), creating its state.
func (c *Lifecycle) group(k Key) int32 {
	g := c.groups.of(k)
	if g >= 0 {
		c.ensure(g)
	}
	return g
}

// ensure creates the state of group g if it is new.
func (c *Lifecycle) ensure(g int32) {
	if int(g) == len(c.counts) {
		c.counts = append(c.counts, make([][4]int64, c.nb))
		c.bytes += int64(c.nb)*32 + 24
	}
}

// Add accumulates one chunk of a user's trail (package trail). The chunk
// is borrowed only for the call. Cost: O(events up to To), one bucket
// lookup per active bucket (the rest of a bucket's events are skipped);
// no allocation except new breakdown groups.
func (c *Lifecycle) Add(tr *trail.Trail) {
	if !c.spec.Breakdown.check(tr) {
		panic("analysis: Lifecycle.Add: trail lacks the breakdown column")
	}
	if tr.Offset == 0 {
		c.g = c.group(c.spec.Breakdown.user(tr))
		c.seenB, c.last, c.listedID = -2, -1, false
	}
	if c.g >= 0 {
		c.walk(tr)
	}
	if !tr.More && c.g >= 0 && c.last >= 0 && int(c.last) < c.nb {
		c.count(tr, c.last+1, LifecycleDormant)
	}
}

// walk reads a chunk's events: the first event (its bucket decides
// "new") and the active buckets.
func (c *Lifecycle) walk(tr *trail.Trail) {
	times := tr.Times
	masks := tr.Mask[:len(times)]
	bounds := c.spec.Bounds
	from, to := c.spec.From, c.spec.To
	i := 0
	if c.seenB == -2 {
		for ; i < len(times) && masks[i]&c.seen == 0; i++ {
		}
		if i == len(times) {
			return
		}
		c.seenB = -1
		if t := times[i]; t >= bounds[0] {
			c.seenB = int32(c.idx.of(t))
		}
		i = 0
	}
	if len(times) > i && times[i] < bounds[0] {
		i = skipBelow(times, i, bounds[0])
	}
	for ; i < len(times); i++ {
		t := times[i]
		if t >= to {
			break
		}
		if masks[i]&c.active == 0 || (t >= bounds[1] && t < from) {
			continue
		}
		b := int32(c.idx.of(t))
		if b != c.last {
			c.activeIn(tr, b)
		}
		// Every later event of bucket b changes nothing.
		i = skipBelow(times, i, bounds[b+1]) - 1
	}
}

// activeIn records that the user is active in bucket b > c.last.
func (c *Lifecycle) activeIn(tr *trail.Trail, b int32) {
	if b > 0 {
		st := LifecycleResurrecting
		switch {
		case c.seenB == b:
			st = LifecycleNew
		case c.last == b-1:
			st = LifecycleReturning
		}
		if c.last >= 0 && c.last < b-1 {
			c.count(tr, c.last+1, LifecycleDormant)
		}
		c.count(tr, b, st)
	}
	c.last = b
}

// count counts the user with status st in bucket b (1..N).
func (c *Lifecycle) count(tr *trail.Trail, b int32, st LifecycleStatus) {
	c.counts[c.g][b-1][st]++
	if l := c.spec.List; l != nil && !c.listedID && l.Bucket == int(b-1) && l.Status == st && c.groups.keys[c.g] == l.Key {
		c.list.Add(tr.ID)
		c.listedID = true
	}
}

// Merge adds the counts of o, created from an equal spec (or decoded with
// DecodeLifecycle), into c. o is not modified. A spec that differs is an
// error wrapping ErrState, and c is left unchanged.
func (c *Lifecycle) Merge(o *Lifecycle) error {
	if err := c.sameSpec(o); err != nil {
		return err
	}
	for og, k := range o.groups.keys {
		g := c.groups.add(k)
		c.ensure(g)
		for b := range o.counts[og] {
			for s := range c.counts[g][b] {
				c.counts[g][b][s] += o.counts[og][b][s]
			}
		}
	}
	return c.list.Merge(&o.list)
}

// Bytes returns the memory the accumulator holds, for the query's budget.
func (c *Lifecycle) Bytes() int64 { return c.bytes + c.groups.bytes() + c.list.Bytes() }

// Result returns the groups in newly allocated slices owned by the
// caller; c stays usable.
func (c *Lifecycle) Result() LifecycleResult {
	var res LifecycleResult
	for _, g := range c.groups.sorted() {
		res.Groups = append(res.Groups, LifecycleGroup{Key: c.groups.keys[g], Counts: slices.Clone(c.counts[g])})
	}
	if c.spec.List != nil {
		res.List = &c.list
	}
	return res
}

package segment

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
)

// This file holds the test input builders: a row-oriented builder that
// turns logical events into a valid Input, the realistic product-analytics
// generator used for the size and speed figures, and a random generator for
// property tests.

// testEvent is one logical event of a test input.
type testEvent struct {
	user  string
	time  int64
	name  string
	props map[string]event.Value
}

// hashID is the tests' user hash, UserHash: inputs hashed with it get the
// users encoding without stored hashes (encUsersIDs), others encUsers.
func hashID(id string) uint64 { return UserHash([]byte(id)) }

// buildInput sorts evs by (hash(user), user, time, arrival) and builds an
// Input with the property schema types (dictionaries in first-use order, plus an
// unused and a duplicate entry to exercise compaction).
func buildInput(evs []testEvent, types map[string]event.Type, hash func(string) uint64) *Input {
	idx := make([]int, len(evs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ea, eb := &evs[a], &evs[b]
		return cmp.Or(cmp.Compare(hash(ea.user), hash(eb.user)), strings.Compare(ea.user, eb.user), cmp.Compare(ea.time, eb.time))
	})
	n := len(evs)
	in := &Input{Times: make([]int64, n), Events: make([]uint32, n), EventNames: []string{"zz-unused"}}
	evCode := map[string]uint32{}
	names := make([]string, 0, len(types))
	for name := range types {
		names = append(names, name)
	}
	slices.Sort(names)
	codes := make([]map[string]uint32, len(names))
	for j, name := range names {
		col := PropColumn{Name: name, Type: types[name], Present: make([]uint64, (n+63)/64)}
		switch col.Type {
		case event.TypeFloat:
			col.Floats = make([]float64, n)
		case event.TypeString:
			col.Strs = make([]uint32, n)
			col.Dict = []string{"zz-unused"}
			codes[j] = map[string]uint32{}
		default:
			col.Ints = make([]int64, n)
		}
		in.Props = append(in.Props, col)
	}
	for r, i := range idx {
		e := &evs[i]
		if len(in.Users) == 0 || in.Users[len(in.Users)-1].ID != e.user {
			in.Users = append(in.Users, User{Hash: hash(e.user), ID: e.user})
		}
		in.Users[len(in.Users)-1].Rows++
		in.Times[r] = e.time
		c, ok := evCode[e.name]
		if !ok {
			c = uint32(len(in.EventNames))
			evCode[e.name] = c
			in.EventNames = append(in.EventNames, e.name)
		}
		in.Events[r] = c
		for j, name := range names {
			v, ok := e.props[name]
			if !ok {
				continue
			}
			col := &in.Props[j]
			col.Present[r>>6] |= 1 << (r & 63)
			switch col.Type {
			case event.TypeFloat:
				col.Floats[r] = v.Float
			case event.TypeString:
				c, ok := codes[j][v.Str]
				if !ok {
					c = uint32(len(col.Dict))
					codes[j][v.Str] = c
					col.Dict = append(col.Dict, v.Str)
				}
				col.Strs[r] = c
			default:
				col.Ints[r] = v.Int
			}
		}
	}
	in.EventNames = append(in.EventNames, in.EventNames[len(in.EventNames)-1]) // duplicate, unused
	return in
}

// zipf draws from a Zipf distribution over [0, n).
func zipf(rng *rand.Rand, s float64, n int) func() int {
	z := rand.NewZipf(rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), s, 1, uint64(n-1))
	return func() int { return int(z.Uint64()) }
}

// realisticShape documents the generator of realisticInput.
const realisticShape = "one day of one shard: users with 9-digit numeric ids, 1+Poisson(2) sessions " +
	"(starts uniform over the day) of 1+Geometric(mean 12) events, second-resolution timestamps " +
	"(gaps Exp(20 s) within a session), 40 event names (Zipf 1.1), price float on 15% of events " +
	"(2 decimals, log-normal around 30), platform string (3 values, per user, always set), " +
	"country string (60 values Zipf, per user, set on 95% of users)"

// realisticInput generates about rows events of typical product analytics
// (see realisticShape), deterministically from seed.
func realisticInput(seed uint64, rows int) *Input {
	rng := rand.New(rand.NewPCG(seed, 1))
	evName := zipf(rng, 1.1, 40)
	country := zipf(rng, 1.3, 60)
	platforms := []string{"web", "ios", "android"}
	day := int64(1_700_006_400) * 1e6
	evs := make([]testEvent, 0, rows+200)
	for len(evs) < rows {
		id := fmt.Sprintf("%09d", 100_000_000+rng.IntN(900_000_000))
		plat := event.String(platforms[rng.IntN(3)])
		ctry, hasCtry := event.String(fmt.Sprintf("C%02d", country())), rng.Float64() < 0.95
		sessions := 1 + poisson(rng, 2)
		for range sessions {
			t := day + rng.Int64N(86400)*1e6
			for k := 0; k == 0 || rng.Float64() > 1.0/12; k++ {
				t += int64(rng.ExpFloat64()*20) * 1e6
				props := map[string]event.Value{"platform": plat}
				if hasCtry {
					props["country"] = ctry
				}
				if rng.Float64() < 0.15 {
					props["price"] = event.Float(math.Round(math.Exp(rng.NormFloat64()*0.8+3.4)*100) / 100)
				}
				evs = append(evs, testEvent{user: id, time: t, name: fmt.Sprintf("event_%02d", evName()), props: props})
			}
		}
	}
	return buildInput(evs, map[string]event.Type{"platform": event.TypeString, "country": event.TypeString, "price": event.TypeFloat}, hashID)
}

func poisson(rng *rand.Rand, mean float64) int {
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// randomInput generates a random valid Input from rng: random users (some
// with equal hashes), times with ties and wide ranges, and one column of
// each property type with random presence and extreme values.
func randomInput(rng *rand.Rand) *Input {
	nUsers := rng.IntN(60)
	nNames := 1 + rng.IntN(300)
	timeScale := []int64{1, 1000, 1e6, 1 << 40}[rng.IntN(4)]
	presence := []float64{0, 0.01, 0.5, 0.99, 1}
	types := map[string]event.Type{"i": event.TypeInt, "f": event.TypeFloat, "s": event.TypeString, "b": event.TypeBool, "t": event.TypeTime}
	pres := map[string]float64{}
	for _, k := range slices.Sorted(maps.Keys(types)) { // in a fixed order: the draws are reproducible
		pres[k] = presence[rng.IntN(len(presence))]
	}
	var evs []testEvent
	for u := range nUsers {
		id := fmt.Sprintf("user-%d", u)
		if rng.IntN(8) == 0 {
			id = strings.Repeat("x", rng.IntN(event.MaxUserIDBytes+1))
			if u%2 == 0 {
				id = fmt.Sprintf("%s%d", id[:len(id)/2], u)
			}
		}
		if slices.ContainsFunc(evs, func(e testEvent) bool { return e.user == id }) {
			continue
		}
		t := rng.Int64N(1<<50) - 1<<49
		for range 1 + rng.IntN([]int{1, 5, 400}[rng.IntN(3)]) {
			t += rng.Int64N(3) * timeScale
			props := map[string]event.Value{}
			if rng.Float64() < pres["i"] {
				props["i"] = event.Int([]int64{math.MinInt64, math.MaxInt64, 0, -1, rng.Int64(), rng.Int64N(100) - 50}[rng.IntN(6)])
			}
			if rng.Float64() < pres["f"] {
				props["f"] = event.Float([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 12.34, rng.NormFloat64(), float64(rng.IntN(1000)) / 100}[rng.IntN(8)])
			}
			if rng.Float64() < pres["s"] {
				props["s"] = event.String(fmt.Sprintf("v%d", rng.IntN(1+rng.IntN(500))))
			}
			if rng.Float64() < pres["b"] {
				props["b"] = event.Bool(rng.IntN(2) == 0)
			}
			if rng.Float64() < pres["t"] {
				props["t"] = event.Time(t + rng.Int64N(1e9))
			}
			evs = append(evs, testEvent{user: id, time: t, name: fmt.Sprintf("ev%d", rng.IntN(nNames)), props: props})
		}
	}
	// A coarse hash makes some users share a hash, ordered by id (and
	// stores the hashes: encUsers).
	coarse := func(id string) uint64 { return hashID(id) >> 61 }
	if rng.IntN(2) == 0 {
		coarse = hashID
	}
	return buildInput(evs, types, coarse)
}

// usersBlock returns a block buffer holding users (their hashes, ids and
// row counts), as encodeUsers takes them.
func usersBlock(users []User) *blockBuf {
	b := &blockBuf{idOff: []int{0}, starts: []int{0}}
	for _, u := range users {
		b.hashes = append(b.hashes, u.Hash)
		b.ids = append(b.ids, u.ID...)
		b.idOff = append(b.idOff, len(b.ids))
		b.starts = append(b.starts, b.starts[len(b.starts)-1]+u.Rows)
	}
	return b
}

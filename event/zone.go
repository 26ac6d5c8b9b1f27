package event

//go:generate go run ./internal/mkzones zones.go

import (
	"fmt"
	"slices"
	"time"
)

// LoadZone returns the time zone of an IANA time zone database name
// ("Europe/Berlin", "UTC", "Asia/Calcutta" and the other names of the
// database's links). "" means UTC. Every other name is an error: in
// particular "Local" and the aliases of the server's own zone that
// time.LoadLocation would accept ("localtime", "posixrules",
// "posix/...", "right/..." and file names of the system's zoneinfo
// directory), so that a query never answers in the zone of the machine it
// happens to run on (docs/analytics.md §9). Names are case-sensitive, as in the
// database. The list of names is Go's copy of the database (zones.go,
// generated); the zone's rules come from the system or, in the spur
// binary, from the embedded time/tzdata.
//
// The error names the input (quoted briefly) and gives an example.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if _, ok := slices.BinarySearch(zoneNames[:], name); !ok {
		return nil, fmt.Errorf("time zone %s is not an IANA time zone name: want a name such as \"Europe/Berlin\" or \"UTC\" (the server's own zone is never implied)", Quote(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %s: %w", Quote(name), err)
	}
	return loc, nil
}

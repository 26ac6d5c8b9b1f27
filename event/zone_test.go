package event

import (
	"strings"
	"testing"
)

func TestLoadZone(t *testing.T) {
	for _, name := range []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Calcutta", "Etc/GMT+5", "US/Eastern"} {
		loc, err := LoadZone(name)
		if err != nil {
			t.Errorf("LoadZone(%q): %v", name, err)
			continue
		}
		if want := name; want != "" && loc.String() != want {
			t.Errorf("LoadZone(%q) = %s", name, loc)
		}
	}
	// The server's own zone under any of its names, file names of the
	// zoneinfo directory and case variants are not IANA names.
	for _, name := range []string{"Local", "localtime", "posixrules", "posix/Europe/Berlin", "right/UTC",
		"europe/berlin", "zone.tab", "/etc/localtime", "../zoneinfo/UTC", "Europe/Berlin ", "Mars/Olympus"} {
		_, err := LoadZone(name)
		if err == nil || !strings.Contains(err.Error(), "not an IANA time zone name") {
			t.Errorf("LoadZone(%q): error %v, want not an IANA name", name, err)
		}
	}
}

func TestZoneNamesSorted(t *testing.T) {
	for i := 1; i < len(zoneNames); i++ {
		if zoneNames[i-1] >= zoneNames[i] {
			t.Fatalf("zoneNames not sorted at %d: %q >= %q", i, zoneNames[i-1], zoneNames[i])
		}
	}
	if len(zoneNames) < 400 {
		t.Fatalf("only %d zone names", len(zoneNames))
	}
}

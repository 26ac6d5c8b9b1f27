package server

import (
	"testing"
)

// TestCSVFilename: the CSV download of every kind is named after it
// (spur-KIND.csv). The name once came from a type switch that knew only
// the first four kinds: stickiness, lifecycle, paths and attribution were
// downloaded as spur-result.csv.
func TestCSVFilename(t *testing.T) {
	st := openCardano(t)
	ts := start(t, Config{Store: st})
	const rng = `"range": {"from": "2021-04-26", "to": "2021-06-28"}, "tz": "UTC"`
	for kind, q := range map[string]string{
		"trend":      `{"kind": "trend", ` + rng + `, "series": [{"event": "answer"}]}`,
		"funnel":     funnelQuery,
		"retention":  `{"kind": "retention", ` + rng + `, "start": {"event": "signup"}, "period": "week", "periods": 4}`,
		"cohort":     `{"kind": "cohort", "cohort": {"performed": {"event": "answer"}}}`,
		"stickiness": `{"kind": "stickiness", ` + rng + `, "series": [{"event": "answer"}]}`,
		"lifecycle":  `{"kind": "lifecycle", ` + rng + `, "interval": "week", "event": "answer"}`,
		"paths":      `{"kind": "paths", ` + rng + `, "events": "$any", "steps": 3}`,
		"attribution": `{"kind": "attribution", ` + rng + `, "conversion": {"event": "answer"},
			"touchpoints": [{"event": "question", "lookback": "30d"}], "channel": "detail"}`,
	} {
		code, hdr, b := ts.do(t, "POST", "api/apps/cardano/query?output=csv", q)
		if code != 200 {
			t.Fatalf("%s: %d %s", kind, code, b)
		}
		want := `attachment; filename="spur-` + kind + `.csv"`
		if got := hdr.Get("Content-Disposition"); got != want {
			t.Errorf("%s: Content-Disposition %q, want %q", kind, got, want)
		}
	}
}

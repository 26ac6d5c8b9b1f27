package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spur runs the CLI in-process and returns stdout, stderr and the error.
func spur(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root, _ := newRoot(&out, &errb)
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	err := root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func TestDemo(t *testing.T) {
	out, _, err := spur(t, "", "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"total            3987", // Cardano sign-ups: 3,987 signup events (dataset README)
		"1  clicks     20",      // OTTO: 20 users clicked
		"2   carts      7",      // 7 of them added to cart afterwards
		"demo finished",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

const goodCSV = `user_id,ts,event,price
u1,2021-05-01T10:00:00Z,view,
u1,2021-05-01T10:05:00Z,buy,12.5
u2,2021-05-02T09:00:00Z,view,
`

// badCSV has a malformed timestamp on line 7 and a wrong-typed price on
// line 9 (line 1 is the header).
const badCSV = `user_id,ts,event,price
u3,2021-05-03T10:00:00Z,view,
u3,2021-05-03T10:01:00Z,buy,3.25
u4,2021-05-03T11:00:00Z,view,
u4,2021-05-03T11:02:00Z,buy,7
u5,2021-05-04T08:00:00Z,view,
u5,2021-05-32T08:00:00Z,view,
u5,2021-05-04T08:03:00Z,buy,1.5
u6,2021-05-04T09:00:00Z,buy,abc
u6,2021-05-04T09:10:00Z,view,
`

func TestImportBadCSVChangesNothing(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(good, []byte(goodCSV), 0o644)
	os.WriteFile(bad, []byte(badCSV), 0o644)
	data := filepath.Join(dir, "store")
	common := []string{"--data", data, "import", "--app", "shop", "--time", "ts"}
	if _, stderr, err := spur(t, "", append(common, good)...); err != nil {
		t.Fatalf("good import: %v\n%s", err, stderr)
	}
	before, _, err := spur(t, "", "--data", data, "inspect", "--app", "shop", "--json")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = spur(t, "", append(common, bad)...)
	if err == nil {
		t.Fatal("bad import succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"bad.csv:7", `"ts"`, "bad.csv:9", `"price"`, "nothing applied"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	after, _, err := spur(t, "", "--data", data, "inspect", "--app", "shop", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Fatalf("store changed by a rejected import:\n%s\n%s", before, after)
	}
	// With --max-errors 2 the 7 good rows are applied.
	if _, stderr, err := spur(t, "", append(common[:len(common):len(common)], "--max-errors", "2", bad)...); err != nil {
		t.Fatalf("import with --max-errors: %v", err)
	} else if !strings.Contains(stderr, "imported 7 events rows") || !strings.Contains(stderr, "2 bad rows skipped") {
		t.Fatalf("report: %s", stderr)
	}
}

func TestQueryCommand(t *testing.T) {
	data := goodStore(t)
	q := `{"kind":"funnel","range":{"from":"2021-05-01","to":"2021-05-03"},"steps":[{"event":"view"},{"event":"buy"}]}`
	out, _, err := spur(t, q, "--data", data, "query", "--app", "shop", "-")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Steps []struct{ Users int64 }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Steps) != 2 || res.Steps[0].Users != 2 || res.Steps[1].Users != 1 {
		t.Fatalf("result %s (%v)", out, err)
	}
	out, _, err = spur(t, q, "--data", data, "query", "--app", "shop", "--table", "-")
	if err != nil || !strings.Contains(out, "50.0%") {
		t.Fatalf("table %q %v", out, err)
	}
	// A bad query prints the docs/analytics.md §9 error JSON and fails.
	out, _, err = spur(t, `{"kind":"funnel","steps":[]}`, "--data", data, "query", "--app", "shop", "-")
	if err == nil || !strings.Contains(out, `"code":"invalid_query"`) {
		t.Fatalf("bad query: %q %v", out, err)
	}
	out, _, err = spur(t, q, "--data", data, "query", "--app", "nope", "-")
	if err == nil || !strings.Contains(out, `"code":"not_found"`) {
		t.Fatalf("unknown app: %q %v", out, err)
	}
}

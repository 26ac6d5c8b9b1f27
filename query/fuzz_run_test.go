package query

import (
	"context"
	"errors"
	"testing"

	"github.com/spurdb/spur/gen"
)

// FuzzRun: any query JSON, run against a small app with event and user
// properties, either answers or fails with an *Error whose code is
// invalid_query or not_found (never internal, never a panic). It fuzzes
// the filter, breakdown, cohort-tree and list validation and compilation.
func FuzzRun(f *testing.F) {
	for _, s := range []string{genTrendAll, genFunnelAll, genRetAll, genCohort, genStickiness, genStickinessEvent, genLifecycle, genPaths, genPathsEnd, genAttribution, genAttributionFirst,
		`{"kind":"trend","series":[{"event":"purchase","where":[{"property":"price","op":"in","value":[1,"2",3.5]}]}]}`,
		`{"kind":"cohort","cohort":{"or":[{"not":{"first_performed":{"event":"install"}}},{"user_property":{"property":"signup_time","op":"lt","value":"2024-02-01"}}]}}`,
		`{"kind":"cohort","cohort":"x"}`,
		`{"kind":"funnel","steps":[{"event":"a"},{"event":"b"}],"list":{"step":1,"offset":5,"limit":1}}`,
	} {
		f.Add([]byte(s))
	}
	st := openStore(f, f.TempDir(), 2)
	importGen(f, st, "g", gen.Config{Events: 300, Seed: 1})
	eng := New(st, Config{Workers: 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := Parse(data)
		if err == nil {
			q.App = "g"
			_, err = eng.Run(context.Background(), q)
		}
		if err == nil {
			return
		}
		var qe *Error
		if !errors.As(err, &qe) || (qe.Code != CodeInvalidQuery && qe.Code != CodeNotFound) {
			t.Fatalf("%s: %v", data, err)
		}
	})
}

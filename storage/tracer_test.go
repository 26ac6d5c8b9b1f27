package storage

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestTracerRecordsNestedAndParallelStages(t *testing.T) {
	tr := NewTracer("request")
	ctx := tr.Context(context.Background())
	pctx, plan := StartStage(ctx, "plan", -1)
	time.Sleep(2 * time.Millisecond)
	_, inner := StartStage(pctx, "compile", -1)
	inner.End()
	plan.End()
	sctx, scan := StartStage(ctx, "scan", -1)
	var wg sync.WaitGroup
	for shard := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, st := StartStage(sctx, "scan shard", shard)
			time.Sleep(time.Millisecond)
			st.End()
		}()
	}
	wg.Wait()
	scan.End()
	root := tr.Finish()

	if root.Name != "request" || len(root.Children) != 2 {
		t.Fatalf("root %+v", root)
	}
	p, s := root.Children[0], root.Children[1]
	if p.Name != "plan" || p.MS < 2 || len(p.Children) != 1 || p.Children[0].Name != "compile" || p.ID != nil {
		t.Errorf("plan span %+v", p)
	}
	if p.Children[0].StartMS < p.StartMS || p.Children[0].StartMS+p.Children[0].MS > p.StartMS+p.MS+0.002 {
		t.Errorf("compile %+v not inside plan %+v", p.Children[0], p)
	}
	seen := map[int]bool{}
	for _, c := range s.Children {
		if c.Name != "scan shard" || c.ID == nil || c.MS < 1 || c.StartMS < s.StartMS {
			t.Errorf("shard span %+v", c)
			continue
		}
		seen[*c.ID] = true
	}
	if s.Name != "scan" || len(seen) != 4 || s.StartMS < p.StartMS+p.MS-0.002 {
		t.Errorf("scan span %+v with shards %v", s, seen)
	}
	if root.MS < s.StartMS+s.MS-0.002 {
		t.Errorf("root %v ms ends before scan", root.MS)
	}
}

func TestStageWithoutTracerAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_, st := StartStage(ctx, "scan shard", 3)
		st.End()
	}); n != 0 {
		t.Errorf("%v allocations per untraced stage", n)
	}
}

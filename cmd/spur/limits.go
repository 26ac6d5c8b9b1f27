package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
	"github.com/spurdb/spur/query"
)

// byteSize is a flag holding a memory size in bytes, set from a human
// size such as 256MiB or 2GiB (query.ParseBytes).
type byteSize int64

func (b *byteSize) Set(s string) error {
	n, err := query.ParseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }

func (b *byteSize) Type() string { return "size" }

// queryLimits are the flags bounding queries, shared by `spur query` and
// `spur serve`.
type queryLimits struct {
	memory  byteSize      // each query's budget, bytes
	total   byteSize      // all running queries' budgets together, bytes
	timeout time.Duration // each query's time limit; ≤ 0: none
}

// register adds --query-memory, --query-memory-total and --query-timeout
// (default timeout) to f.
func (l *queryLimits) register(f *pflag.FlagSet, timeout time.Duration, timeoutHelp string) {
	l.memory = byteSize(query.DefaultMemoryBudget)
	l.total = byteSize(query.DefaultMemoryTotal())
	f.Var(&l.memory, "query-memory", "memory budget of one query (e.g. 512MiB, 2GiB): past it the query fails with limit_exceeded; a query's \"limits\" may ask for less")
	f.Var(&l.total, "query-memory-total", "memory all running queries may hold together, by default half the machine's memory: a query reserves its budget first and waits for it, then fails with unavailable")
	f.DurationVar(&l.timeout, "query-timeout", timeout, timeoutHelp)
}

// check validates the limits.
func (l *queryLimits) check() error {
	if l.memory > l.total {
		return fmt.Errorf("--query-memory %s is more than --query-memory-total %s", l.memory.String(), l.total.String())
	}
	return nil
}

// engineConfig returns the engine configuration of the limits, with a new
// Admission of the total.
func (l *queryLimits) engineConfig(workers int) query.Config {
	return query.Config{Workers: workers, Timeout: max(l.timeout, 0), MemoryBudget: int64(l.memory),
		Admission: query.NewAdmission(int64(l.total), 0)}
}

// interruptGrace is how long a command interrupted by SIGINT or SIGTERM
// may take to stop before exitAfterInterrupt ends the process.
const interruptGrace = 750 * time.Millisecond

// exitAfterInterrupt ends the process with status 1 through exit when the
// command is still running grace after ctx (the signal context) is done,
// saying so on stderr: a guarantee that an interrupted query exits within
// a second even should some loop not check its context. The returned
// function disarms it; call it when the command returns.
func exitAfterInterrupt(ctx context.Context, grace time.Duration, stderr io.Writer, exit func(int)) (disarm func()) {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-done:
		case <-time.After(grace):
			fmt.Fprintf(stderr, "spur: still running %v after %v; exiting\n", grace, context.Cause(ctx))
			exit(1)
		}
	})
	return func() {
		stop()
		close(done)
	}
}

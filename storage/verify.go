package storage

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/spurdb/spur/storage/segment"
)

// VerifyReport is the outcome of App.Verify.
type VerifyReport struct {
	Segments int   // segments checked
	Rows     int64 // rows in them
	Bytes    int64 // file bytes read
	// Problems holds one error per corrupt segment, in manifest order:
	// each matches errors.Is(err, segment.ErrCorruption) and names the
	// file and the offset of the first problem found in it.
	Problems []error
}

// Verify checks every segment of the app's current snapshot completely
// (segment.Reader.Verify: header, trailer and footer checksums, every
// chunk's CRC-32C, every decoded value against the footer — users sorted,
// time ranges, event bitsets and counts, dictionary codes), on GOMAXPROCS
// goroutines; like ClickHouse's CHECK TABLE, it is the on-demand
// counterpart of the per-chunk checksums every query read checks. Corrupt
// segments are listed in the report, not returned as the error; the error
// is ctx.Err() or an I/O failure other than corruption.
func (a *App) Verify(ctx context.Context) (*VerifyReport, error) {
	snap := a.Snapshot()
	refs := snap.Manifest.Segments
	problems := make([]error, len(refs))
	var (
		mu    sync.Mutex
		fatal error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range min(runtime.GOMAXPROCS(0), max(len(refs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := snap.Reader(refs[i])
				if err == nil {
					err = r.Verify()
				}
				switch {
				case err == nil:
				case errors.Is(err, segment.ErrCorruption):
					problems[i] = err
				default:
					mu.Lock()
					fatal = errors.Join(fatal, err)
					mu.Unlock()
				}
			}
		}()
	}
	rep := &VerifyReport{}
	var err error
	for i, ref := range refs {
		if err = ctx.Err(); err != nil {
			break
		}
		next <- i
		rep.Segments++
		rep.Rows += ref.Rows
		rep.Bytes += ref.Bytes
	}
	close(next)
	wg.Wait()
	if err != nil {
		return rep, err
	}
	if fatal != nil {
		return rep, fatal
	}
	for _, p := range problems {
		if p != nil {
			rep.Problems = append(rep.Problems, p)
		}
	}
	return rep, nil
}

package analysis

import "unsafe"

// StateBytes returns the bytes of memory the accumulator holds: its fixed
// per-user scratch plus the kept time-to-convert durations (8 bytes per
// user and step reached, for the exact median). Used for the query's
// peak_memory_bytes statistic.
func (f *Funnel) StateBytes() int64 {
	n := int64(unsafe.Sizeof(*f))
	for _, d := range f.durs {
		n += int64(cap(d)) * 8
	}
	return n
}

// Package cputime reads the process's CPU time, for benchmarks that
// report throughput per CPU-second and for `spur bench-query`'s per-run
// CPU figure: unlike wall time it does not grow when other processes take
// a core, and CPU/wall shows how busy a scan kept the cores.
package cputime

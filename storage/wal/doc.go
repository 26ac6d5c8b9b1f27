// Package wal is an app's write-ahead log: a sequence of opaque records,
// each acknowledged only once it is durable, numbered consecutively, and
// replayed in order after a restart. The store writes a request's events
// to it before making them visible (spec docs/ingest.md §2) and releases whole
// files once segments cover their records.
//
// # Guarantees
//
//   - Log.Append (and AppendBatch) returns nil only after the record's
//     bytes, every earlier record's bytes and the directory entry of its
//     file have been fsynced: a crash or power loss afterwards loses
//     nothing that was acknowledged.
//   - Sequence numbers are consecutive: 1, 2, 3 … (or from
//     Options.FirstSeq for a new log), assigned in commit order; a batch's
//     records are consecutive. The seqs of a failed commit were never
//     returned to anyone and are given to the next commit, so the log
//     never has holes — but those a salvage declares (a gap file, see
//     Salvage below), which Replay passes over.
//   - Group commit: every append waiting when a commit starts shares its
//     write and its fsync, and the next commit starts as soon as the
//     previous fsync returns (no timer), as in PostgreSQL's WAL flush
//     and pebble's LogWriter.
//   - Options.Apply sees each commit group after its fsync and before any
//     append of the group returns, one group at a time in seq order (see
//     Options.Apply).
//   - A batch is atomic across a crash: after a power loss it is in the
//     log entirely or not at all.
//   - Open checks every byte of every file, repairs a torn tail of the
//     last file and refuses, with a *CorruptionError, any other damage. It
//     never skips an acknowledged record silently.
//   - Salvage copies the intact records of a damaged log into a new log
//     that opens, and reports every byte range it could not read.
//
// # Files
//
// The log is a directory of files named by the seq of their first record,
// 20 decimal digits and ".wal" (00000000000000000001.wal), so that the
// names sort in log order. Appends go to the last file; a commit that
// finds it at Options.SegmentSize bytes or more starts a new one first
// (a commit group is never split between files). Open never appends to an
// existing file: the first commit after Open starts a new one.
//
// Byte layout, little-endian:
//
//	file header, 20 bytes:
//	  [0:7)   magic "SPURWAL"
//	  [7]     format version (1); a newer one is refused with ErrUnsupportedVersion
//	  [8:16)  u64 seq of the file's first record (equal to the name's)
//	  [16:20) u32 CRC-32C (Castagnoli) of bytes [0:16)
//	records, back to back, each:
//	  [0:4)   u32 payload length n (at most MaxRecordSizeLimit)
//	  [4:8)   u32 CRC-32C of bytes [0:4) and [8:24+n): length, seq, group, batch and payload
//	  [8:16)  u64 seq
//	  [16:20) u32 index of the record in its commit group (0 starts a group)
//	  [20:24) u32 records that follow it in its batch (0 ends a batch)
//	  [24:24+n) payload
//
// A gap file, which only Salvage writes, takes the place of records lost
// to damage, so that the log has no unexplained hole. It is named like a
// log file, for the first seq lost, and is exactly 28 bytes:
//
//	[0:7)   magic "SPURGAP"
//	[7]     format version (1)
//	[8:16)  u64 first seq lost (equal to the name's)
//	[16:24) u64 end: the seq after the last one lost, the next file's first
//	[24:28) u32 CRC-32C of bytes [0:24)
//
// A build that predates gap files refuses a log holding one (its header
// is not a log file's), rather than skipping records.
//
// The group index lets Open tell a torn tail from damage: a commit group
// is written and fsynced as a whole, and the next one is written only
// after that fsync returned, so a power loss can tear only the last
// group of the last file. A damaged record followed anywhere in its file
// by an intact record of a later group (one whose group starts after the
// damaged record's seq) was therefore fsynced: that is damage, not a tear.
// The batch count makes a torn batch recognisable, so that the repair cuts
// it entirely.
//
// # Open: checks and repair
//
// Open reads every file, checking every header and record checksum:
//
//   - In every file but the last, the records must run from the file's
//     first seq to the seq before the next file's first, intact and
//     consecutive, ending a batch. Bytes after that are ignored: they can
//     only be a commit that failed (see below), whose seqs the next file
//     took over. Anything else — a damaged record, a missing record, a
//     damaged header — is a *CorruptionError naming the file and offset.
//     A non-last file may instead be a gap file whose end is the next
//     file's first seq; a damaged gap file, one whose end is not, or one
//     that is the last file is a *CorruptionError.
//   - In the last file, the first damaged or incomplete record (a short
//     header, a length past the end of the file, a checksum mismatch,
//     zeroes) starts the torn tail, together with the records of its
//     unfinished batch before it — unless an intact record of a later
//     commit group follows it (a *CorruptionError). Open cuts the torn
//     tail: vfs has no truncate, so it copies the intact prefix to
//     NAME.tmp, fsyncs it, renames it over NAME and fsyncs the directory
//     (Log.Repair reports what was cut). A last file whose header is
//     damaged is rewritten as a header with the name's seq. An intact
//     record that breaks the structure (a wrong seq, group index or batch
//     count: a bug, not a tear) is a *CorruptionError in any file.
//   - A header of a newer format version with a valid checksum is
//     ErrUnsupportedVersion in any file.
//
// What a power loss can still take: damage that hits the last commit
// group of the last file after its fsync (bit rot, not a crash) looks
// exactly like a tear and is cut, as in pebble, RocksDB's
// kTolerateCorruptedTailRecords and Prometheus TSDB.
//
// # Failed writes and fsyncs
//
// After a write or fsync of a commit fails (disk full: ENOSPC; an I/O
// error), the log never writes to that file again (PostgreSQL's fsyncgate
// lesson: after a failed fsync the kernel may have dropped the dirty pages
// and marked them clean, so a later fsync of the same file proves
// nothing). The commit's appends return the error and are not applied.
// The log then at once starts a new file whose first seq is the failed
// commit's first seq (a header, fsynced with its directory entry): that
// file supersedes whatever of the failed commit reached the old file, so
// it can neither be replayed nor hide later records. If that fails too,
// the next commit starts the new file before writing. So appends fail
// while the disk is full and succeed again once it is not, without a
// reopen. The only window left: if the process stops after a failure and
// before the new file could be made, a restart may replay the intact
// records of the failed commit, which were never acknowledged (a client
// retries them; the store deduplicates, docs/ingest.md §3).
//
// # Salvage
//
// Damage that Open refuses stops the app's writes until an operator runs
// `spur recover --app` (docs/ingest.md §2). Salvage reads a damaged log
// without opening it: every file, in seq order, every record's checksum
// checked. After damage it resynchronises on the next intact record, with
// the search Open uses to tell a tear from damage: a candidate's seq must
// be after the damaged record's and reachable by the bytes between (a
// record takes at least 24 bytes), and only then is its checksum
// computed. It writes the intact records after a given seq, with their
// seqs, into a new log, each record its own commit group, a gap file in
// each hole, and reports every byte range that yielded no record with the
// seqs lost there. The store then sets the damaged log aside and puts the
// new one in its place.
//
// Limits: a record is trusted on its checksum (CRC-32C), so a payload
// that itself holds a well-formed record (the bytes of another log, say)
// could be taken for one when damage makes Salvage resynchronise inside
// it; its seq must still fall among the seqs lost there. When the file
// that superseded a failed commit is lost too, the failed commit's intact
// records (never acknowledged) are kept in its place, as after a crash
// between a failure and its fence (see above).
//
// # Concurrency
//
// Append, AppendBatch, Stats, Release and Replay are safe for concurrent
// use (Replay reads up to the newest record durable when it starts; the
// store calls it once, before its first append). One goroutine writes
// and fsyncs the commits; with Options.Apply a
// second one applies them, so that the next commit's write and fsync run
// while the previous group is applied. One Log per directory: the caller
// (the store, holding the app's writer role) must not open a directory
// twice.
package wal

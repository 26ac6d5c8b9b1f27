// Package segment implements Spur's on-disk segment format: an immutable,
// checksummed, columnar file holding the events (or user property writes)
// of one shard for some time range, rows sorted by (user hash, user id
// bytes, time, arrival). A Writer writes a segment a block at a time, the
// footer last (Write does so from a whole Input); NewReader (or Open),
// Reader.Meta, Reader.ReadBlock and Reader.Verify read it back. The row
// filters of a scan (FilterDeltas, FilterDeltasSparse,
// FilterDeltasInRange, FilterDeltasBlock) live here too, beside the time
// encodings they read, which no other package sees.
//
// # Design
//
// Rows are grouped into blocks of whole users (about
// WriterOptions.BlockRows rows); a user with more rows than a block holds
// (WriterOptions.SplitRows) continues in the next block, which is marked
// Continued. Each block stores one chunk per column: users, times,
// events, then each property. A chunk is encoded by its statistics
// (bit-packing at the smallest width, patched bit-packing for skewed time
// deltas, frame of reference, zigzag deltas, exact decimals for floats,
// dictionary codes for strings, presence bitmaps), then compressed with
// zstd only if that makes it WriterOptions.MinZstdRatio times smaller
// (default 2: zstd decoding costs more than the bit-unpacking), then
// checksummed with CRC-32C. The footer holds the segment's identity (its
// shard, kind, catalog generation and arrival-order range, so that a
// store can rebuild its catalog from footers alone), the dictionaries
// (codes assigned in the order the writer first met each string, so that
// a streaming writer never recodes), the schema, per-block zone maps
// (hash and time ranges, a bitset of the event codes present) and the
// chunk records. The chunks tile the bytes between header and footer
// exactly, so the header and trailer fields, the footer checksum and the
// chunk checksums together cover every byte of the file: any change to a
// byte makes NewReader or Verify fail with a *CorruptionError. The footer
// decoder is strict besides: every count, range and order is checked,
// varints must be in their shortest form, and a footer it accepts
// re-encodes to the same bytes.
//
// # File layout (version 4)
//
// All fixed-width integers are little-endian. uvarint and varint are
// encoding/binary's (LEB128; varint zigzag-encoded), in their shortest
// form. A string is a uvarint byte length followed by the bytes. CRC is
// CRC-32C (Castagnoli).
//
//	offset 0        version byte (4; versions 1 to 3 are read too, see
//	                below)
//	offset 1..7     magic "SPURSEG"
//	offset 8..F-1   blocks: for each block in order, its chunks' stored
//	                bytes back to back (users, times, events, property
//	                0..P-1), no padding; offsets follow from the lengths
//	offset F..F+L-1 footer (L bytes)
//	last 33 bytes   trailer:
//	                  +0  u64 footer offset F
//	                  +8  u64 footer length L
//	                  +16 u32 CRC of the footer
//	                  +20 u32 CRC of trailer bytes +0..+19
//	                  +24 version byte (equal to the header's)
//	                  +25 magic "SPUR-END"
//
// The version appears first and again just before the final magic. A
// reader accepts a file only if both agree; if they agree on a version
// newer than it knows, Open returns ErrNewerVersion (a future version may
// change everything after the version byte except the last 9 bytes).
//
// Footer:
//
//	identity (Identity; all 0 for none, kind 0):
//	    byte kind (0 none, 1 events, 2 users),
//	    uvarint shard count (a power of two ≤ MaxShards; 0 with kind 0),
//	    uvarint shard index (< shard count),
//	    uvarint generation (the catalog generation the writing operation
//	        intends to publish),
//	    uvarint seq min, uvarint seq max (arrival ranks of the rows,
//	        min ≤ max < 2^63)
//	uvarint creation time (UTC µs, in (0, year 10000))
//	uvarint rows, uvarint users (distinct), varint min time, varint max
//	    time (µs)
//	uvarint E, E strings: event names, unique, in first-use order
//	E uvarints: rows per event name (each ≥ 1, summing to rows)
//	uvarint P, P properties: string name, byte event.Type (1..5),
//	    uvarint D, D strings: dictionary (strings only; unique, in
//	    first-use order)
//	uvarint B, B blocks (B·⌈E/64⌉ ≤ 32 Mi: the decoded event bitsets
//	    take at most 256 MiB):
//	    uvarint rows (≤ MaxBlockRows), uvarint users (a continued user
//	        counts in each of its blocks)
//	    byte flags: bit 0 continued (the first user is the previous
//	        block's last user, same hash and id, its rows going on in
//	        time order; never on block 0); other bits 0
//	    u64 first user hash, u64 last user hash
//	    varint min time, uvarint max time - min time
//	    uvarint K, K uvarints: the event codes present, as gaps
//	        (code - previous code - 1, the first from -1)
//	    3+P chunk records: byte encoding, byte compression (0 none,
//	        1 zstd), uvarint stored length, uvarint raw length, u32 CRC
//	        of the stored bytes
//
// Versions 1 to 3 lack the identity and creation time, the flags byte of
// each block record (no user continues) and keep their dictionaries
// strictly ascending; version 3 introduced the users encoding 2, version
// 2 the times encoding 3, and event codes were at most 16 bits wide
// before version 4.
//
// A chunk's stored bytes are its raw bytes (compression 0) or one zstd
// frame of them (compression 1; no zstd checksum). Raw chunk layouts,
// where "packed(n, w)" is n values of w bits packed LSB-first into
// ceil(n·w/8) bytes (value i in bits [i·w, (i+1)·w) of the little-endian
// bit stream, Parquet's bit-packing order):
//
//	users (encoding 1):
//	    u64 first hash, byte w, packed(users-1, w) hash deltas,
//	    users uvarints: rows per user (≥ 1), users uvarints: id lengths
//	    (≤ event.MaxUserIDBytes), the ids' bytes back to back
//	users (encoding 2, version 3; the chunk is never compressed):
//	    users uvarints: rows per user, then the keys: byte c (0 none,
//	    1 zstd), uvarint K, and the keys' K bytes (c = 0) or one zstd
//	    frame of them (c = 1): users uvarints id lengths, the ids' bytes.
//	    No hashes: a user's hash is xxhash64 of its id (UserHash), and
//	    readers check that the users ascend by (hash, id) from the
//	    footer's first to last hash. Writers use it when every user's
//	    hash is UserHash, and compress the keys when zstd makes them 4
//	    times smaller (minKeysZstdRatio), so that scans reading only the
//	    row counts decompress nothing.
//	times: uvarint g ≥ 1, varint base, then rows values v in encoding
//	    1 (PFOR), 2 (rows uvarints) or 3 (PFOR with an exception
//	    bitmap); a user's first time is
//	    base + g·v, each later time the previous plus g·v (wrapping
//	    int64 arithmetic). The writer sets base to the block's minimum
//	    and g to the gcd of all offsets and deltas (10^6 for
//	    second-resolution data).
//	PFOR(n): byte w, packed(n, w) low bits, uvarint X exceptions; if
//	    X > 0: byte wg, packed(X, wg) index gaps (index - previous - 1,
//	    the first from -1), byte wh, packed(X, wh) high bits: value =
//	    low | high<<w. Encoding 3 stores, instead of wg and the gaps,
//	    ceil(n/64) u64 bitmap words (bit i%64 of word i/64 set: value
//	    i is an exception; X bits set, none at or past n), so readers
//	    test, rank and copy exceptions without decoding them; writers
//	    choose it when it takes at most 1.5 times the gaps' bytes.
//	events (encoding 1): byte w ≤ 32, packed(rows, w) event codes.
//	property: encoding byte = presence | value<<2 with presence
//	    0 none (raw chunk empty), 1 all rows, 2 bitmap; the raw chunk is
//	    [ceil(rows/64) u64 bitmap words, bit r%64 of word r/64 = row r
//	    set, if presence is 2] followed by the m present rows' values:
//	    value 1 FOR:     varint min, byte w, packed(m, w) of v - min
//	    value 2 delta:   m uvarints zigzag(v[i] - v[i-1]), v[-1] = 0
//	    value 3 plain:   m u64 float64 bits
//	    value 4 decimal: byte d ≤ 9, then FOR of k, value float64(k)/10^d
//	    Ints, bools (0/1) and times (µs) use FOR or delta, floats plain or
//	    decimal, strings FOR of dictionary codes.
//
// # Reading
//
// NewReader reads the header, trailer and footer with pread
// (io.ReaderAt) and validates every footer length and count against the
// bytes present, so that no corrupt length can make it allocate more than
// a small multiple of the footer's size (the event bitsets, bounded
// above, aside). ReadBlock reads the chunks it needs with pread into
// buffers owned by the caller's Block, checks their CRCs, and decodes into
// the Block's reusable slices without allocating in steady state; block
// row counts are capped by MaxBlockRows, which bounds its buffers.
//
// # Writing
//
// A Writer holds the block being built, the dictionaries and the footer
// records of the blocks written (Writer.Bytes). Rows arrive in key order,
// checked; AppendBlockRows copies rows of decoded blocks (a compaction)
// through a Remap of each input's codes, AppendInput whole runs of users
// (an import). A block is encoded and written when the next user does
// not fit, or when one user fills SplitRows rows alone; Close writes the
// footer and the trailer, syncs and closes the file.
package segment

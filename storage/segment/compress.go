package segment

import (
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// castagnoli is the CRC-32C table (hardware accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc returns the CRC-32C of b.
func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// zstdEncoder, fastZstdEncoder and zstdDecoder are shared by every Write and Reader in the
// process: EncodeAll and DecodeAll are safe for concurrent use and keep
// their own pools of block coders (up to GOMAXPROCS), so sharing them
// reuses memory instead of allocating coder state per segment. They hold
// no goroutines (only the streaming APIs start any).
var (
	zstdEncoder     = sync.OnceValue(func() *zstd.Encoder { return newZstdEncoder(zstd.SpeedBetterCompression) })
	fastZstdEncoder = sync.OnceValue(func() *zstd.Encoder { return newZstdEncoder(zstd.SpeedFastest) })
	zstdDecoder     = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecodeAllCapLimit(true)) // never decode past the declared raw size
		if err != nil {
			panic("segment: zstd decoder options: " + err.Error()) // constant options: a programmer bug
		}
		return d
	})
)

// newZstdEncoder returns a shared chunk encoder at level: no zstd
// checksum (chunks carry their own CRC-32C), block coders pooled up to
// GOMAXPROCS.
func newZstdEncoder(level zstd.EncoderLevel) *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(0))
	if err != nil {
		panic("segment: zstd encoder options: " + err.Error()) // constant options: a programmer bug
	}
	return e
}

// decompress decodes stored, one zstd frame that must decode to exactly n
// bytes, into *buf (grown with growPadded) and returns the n bytes.
func decompress(stored []byte, n int, buf *[]byte) ([]byte, error) {
	*buf = growPadded(*buf, n)
	// The cap limit stops a corrupt frame from decoding much more than the
	// declared size (the padding is for unpack, see growPadded).
	out, err := zstdDecoder().DecodeAll(stored, (*buf)[:0:n+unpackPadding])
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("decompressed to %d bytes, %d declared", len(out), n)
	}
	return out, nil
}

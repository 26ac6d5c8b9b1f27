package segment

import (
	"encoding/binary"
	"math/bits"

	"github.com/parquet-go/bitpack"
)

// Bit-packing: n values of w bits each (0 ≤ w ≤ 64) stored LSB-first in a
// little-endian bit stream: value i occupies bits [i*w, (i+1)*w) where bit
// k is bit k%8 of byte k/8. The stream is padded with zero bits to a whole
// byte, so it takes packedLen(n, w) bytes. This is the layout of Parquet's
// RLE/bit-packing hybrid "bit-packed" runs (LSB first).

// bitWidth returns the number of bits needed to represent v (0 for v == 0).
func bitWidth(v uint64) uint { return uint(bits.Len64(v)) }

// packedLen returns the number of bytes of n values packed at width w.
// n is bounded by MaxBlockRows, so the product cannot overflow.
func packedLen(n int, w uint) int { return int((uint64(n)*uint64(w) + 7) / 8) }

// appendPacked appends the low w bits of each of vals, bit-packed, to dst.
func appendPacked(dst []byte, vals []uint64, w uint) []byte {
	if w == 0 {
		return dst
	}
	mask := uint64(1)<<w - 1 // all ones when w == 64
	var acc uint64
	var nb uint // bits used in acc, < 64
	for _, v := range vals {
		v &= mask
		acc |= v << nb // Go defines shifts ≥ 64 as 0
		if nb+w >= 64 {
			dst = binary.LittleEndian.AppendUint64(dst, acc)
			acc = v >> (64 - nb) // 0 when nb == 0
			nb = nb + w - 64
		} else {
			nb += w
		}
	}
	for ; nb > 0; nb -= min(nb, 8) {
		dst = append(dst, byte(acc))
		acc >>= 8
	}
	return dst
}

// unpackPadding is the slack parquet-go/bitpack's vectorised unpacking
// may read past the packed bytes (its PaddingInt64).
const unpackPadding = bitpack.PaddingInt64

// unpack decodes len(dst) values of width w from src, which must hold at
// least packedLen(len(dst), w) bytes. When src has unpackPadding bytes of
// spare capacity (the Reader's buffers always do) it uses
// parquet-go/bitpack's AVX2/NEON kernels, which read (but ignore) that
// slack; otherwise a portable loop.
func unpack[T uint32 | uint64](dst []T, src []byte, w uint) {
	if w == 0 {
		clear(dst)
		return
	}
	if cap(src)-len(src) >= unpackPadding {
		bitpack.Unpack(dst, src[:len(src)+unpackPadding], w)
		return
	}
	mask := uint64(1)<<w - 1 // all ones when w == 64
	i, bit := 0, uint(0)
	if w <= 56 && len(src) >= 8 {
		// One unaligned 8-byte load covers a value of ≤ 56 bits at any
		// bit shift 0..7; stop 8 bytes before the end.
		last := uint(len(src)) - 8
		for ; i < len(dst); i++ {
			b := bit >> 3
			if b > last {
				break
			}
			dst[i] = T(binary.LittleEndian.Uint64(src[b:b+8]) >> (bit & 7) & mask)
			bit += w
		}
	}
	for ; i < len(dst); i++ {
		dst[i] = T(getBits(src, bit, w, mask))
		bit += w
	}
}

// getBits returns the w-bit value at bit offset bit of src, reading byte by
// byte (for the tail of a stream and for widths over 56).
func getBits(src []byte, bit, w uint, mask uint64) uint64 {
	b, s := int(bit>>3), bit&7
	var v uint64
	for k := 0; k < 8 && b+k < len(src); k++ {
		v |= uint64(src[b+k]) << (8 * k)
	}
	v >>= s
	if s+w > 64 && b+8 < len(src) {
		v |= uint64(src[b+8]) << (64 - s)
	}
	return v & mask
}

// uvarintLen returns the length of v's uvarint encoding.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// decodeUvarints decodes len(dst) uvarints from src and returns the number
// of bytes consumed, or -1 if src ends early or holds an overlong varint.
func decodeUvarints(dst []uint64, src []byte) int {
	p := 0
	for i := 0; i < len(dst); {
		// Eight one-byte values at a time (row counts and id lengths
		// mostly are one byte).
		if i+8 <= len(dst) && p+8 <= len(src) {
			if w := binary.LittleEndian.Uint64(src[p:]); w&0x8080808080808080 == 0 {
				d := dst[i : i+8 : i+8]
				d[0], d[1], d[2], d[3] = w&0xff, w>>8&0xff, w>>16&0xff, w>>24&0xff
				d[4], d[5], d[6], d[7] = w>>32&0xff, w>>40&0xff, w>>48&0xff, w>>56
				i, p = i+8, p+8
				continue
			}
		}
		if p < len(src) && src[p] < 0x80 {
			dst[i] = uint64(src[p])
			i, p = i+1, p+1
			continue
		}
		v, n := binary.Uvarint(src[p:])
		if n <= 0 {
			return -1
		}
		dst[i] = v
		i, p = i+1, p+n
	}
	return p
}

// zigzag maps signed to unsigned so that small magnitudes stay small
// (Protocol Buffers' sint64 encoding).
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// unzigzag inverts zigzag.
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// gcd returns the greatest common divisor of a and b (gcd(0, b) = b).
func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

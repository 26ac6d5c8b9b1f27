package segment

import (
	"testing"

	"github.com/parquet-go/bitpack"
)

func BenchmarkUnpackTmp(b *testing.B) {
	for _, w := range []uint{1, 6, 17, 40} {
		vals := make([]uint64, 65536)
		for i := range vals {
			vals[i] = uint64(i*2654435761) & (1<<w - 1)
		}
		src := appendPacked(nil, vals, w)
		src = append(src, make([]byte, 64)...)
		dst := make([]uint64, len(vals))
		b.Run("mine"+string(rune('0'+w/10))+string(rune('0'+w%10)), func(b *testing.B) {
			b.SetBytes(int64(len(vals)))
			for b.Loop() {
				unpack(dst, src, w)
			}
		})
		b.Run("pq"+string(rune('0'+w/10))+string(rune('0'+w%10)), func(b *testing.B) {
			b.SetBytes(int64(len(vals)))
			for b.Loop() {
				bitpack.Unpack(dst, src, w)
			}
			for i := range vals {
				if dst[i] != vals[i] {
					b.Fatal("mismatch", i)
				}
			}
		})
	}
}

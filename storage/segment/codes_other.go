//go:build !amd64 || purego

package segment

// codesAbove reports whether some code exceeds l (codesOver; on amd64
// without -tags purego, an AVX2 maximum).
func codesAbove(codes []uint32, l uint32) bool { return codesOver(codes, l)>>31 != 0 }

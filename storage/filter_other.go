//go:build !amd64 || purego

package storage

// useAVX512 is false off amd64 and with -tags purego: filterDeltasBlock
// filters per user.
var useAVX512 = false

func filterBlockAVX512(a *filterArgs) int {
	panic("storage: filterBlockAVX512 without its assembly")
}

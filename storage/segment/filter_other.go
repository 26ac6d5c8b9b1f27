//go:build !amd64 || purego

package segment

// useAVX512 is false off amd64 and with -tags purego: FilterDeltasBlock
// is not available, and callers filter per user.
const useAVX512 = false

// missingAVX512 says why FilterDeltasBlock cannot run here.
const missingAVX512 = "built without the AVX-512 assembly (not amd64, or -tags purego)"

func filterBlockAVX512(a *filterArgs) int {
	panic("segment: filterBlockAVX512 without its assembly")
}

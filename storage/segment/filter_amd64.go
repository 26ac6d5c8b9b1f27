//go:build amd64 && !purego

package segment

import "golang.org/x/sys/cpu"

// useAVX512 says whether FilterDeltasBlock can run filterBlockAVX512: the
// CPU and OS support AVX-512 F, VL, DQ and BW, POPCNT and BMI2 (build with
// -tags purego for Go code only).
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW && cpu.X86.HasPOPCNT && cpu.X86.HasBMI2

// missingAVX512 says why FilterDeltasBlock cannot run here ("" when it
// can), for the tests that skip.
const missingAVX512 = "the CPU lacks AVX-512 F, VL, DQ or BW, POPCNT or BMI2"

// filterBlockAVX512 filters a.n rows eight per step (see
// FilterDeltasBlock and filterArgs): the running sum of the deltas by
// three shifted adds in a 512-bit register; each row's offset, the sum
// before its user's first row, by one two-table permute chosen by the
// step's user-start bits (segPerm); time = base + g·(sum − offset); the
// live bit of each code from a permute of the live words and a variable
// shift (codes must be below 512); the masks by a gather of the passing
// rows; and the passing times and masks compressed and stored whole. It
// returns the passing rows and leaves per-step counts in a.kstep and
// a.kbits. See filter_amd64.s.
//
//go:noescape
func filterBlockAVX512(a *filterArgs) int

//go:build amd64 && !purego

#include "textflag.h"

// func filterBlockAVX512(a *filterArgs) int
//
// The loads from AX read the fields of *a at the offsets of filterArgs
// (each marked with its field: TestFilterArgsLayout checks them).
//
// Per step of 8 rows, with L the running sum of the step's deltas x alone:
// a row's sum since its user's first row is T = L + O, where O is -(L - x)
// at the step's last user start s ≤ j (that is -L[s-1]), or, with no start
// in the step up to j, the previous step's T in its last lane (segPerm
// gives 15 then). One two-table permute per step, and no broadcast.
//
// With modeThin, a row is dropped when its code is in the thin set, it
// does not start a user, and the row before it passed with a code of the
// thin set and has the same slot. The slot of x = time + add (or, with
// modeThinT, T + add) is ⌊x / slot⌋, computed in float64 as the product
// with 1/slot, floored. While |x| < 2^51 the product's relative error δ
// (≤ 2^-52) keeps δ·|x| below ½, so an x that is not a multiple of slot,
// at least 1 from the next one, floors right; a multiple may floor one
// too low, which the remainder x − q·slot (≥ slot then; exact from one
// fused multiply-add) corrects. A row with a larger |x| is never
// thinnable.
//
// Registers: AX the passing rows so far (k); CX the rows left; SI, BX, R8,
// R12, R13, R14 the step's deltas, codes, flags, kstep, kbits and
// exception bits; R15 the next exception's high part; R9 segPerm; R10 the
// passing rows' codes; DI out; R11 mode; DX scratch. Z16 the previous
// step's T; Z9 zero; Z8 1s (dwords); Z10 the live words; Z12 31s (dwords);
// Z20 base; Z21 g; Z22 from; Z23 span; K4 the step's rows; K6 its
// exceptions. modeThin: Z11 the thin words; Z24 add; Z25 slot and Z26
// 1/slot (float64); Z27 1.0; Z29 2^51; Z28 the previous step's slots
// (float64); K7 whether the previous step's last row was thinnable.
TEXT ·filterBlockAVX512(SB), NOSPLIT, $0-16
	MOVQ a+0(FP), AX
	MOVQ 0(AX), SI // a.deltas
	MOVQ 8(AX), BX // a.codes
	MOVQ 16(AX), CX // a.n
	MOVQ 24(AX), R8 // a.flags
	MOVQ 32(AX), R9 // a.perm
	MOVQ 40(AX), DX // a.live
	VMOVDQU64 (DX), Z10
	MOVQ 48(AX), R10 // a.kcodes
	MOVQ 56(AX), DI // a.out
	MOVQ 72(AX), R12 // a.kstep
	MOVQ 80(AX), R13 // a.kbits
	VPBROADCASTQ 88(AX), Z20 // a.base
	VPBROADCASTQ 96(AX), Z21 // a.g
	VPBROADCASTQ 104(AX), Z22 // a.from
	VPBROADCASTQ 112(AX), Z23 // a.span
	MOVQ 120(AX), R11 // a.mode
	MOVQ 64(AX), R14 // a.exc
	MOVQ 128(AX), R15 // a.highs
	TESTQ $4, R11
	JZ    init
	MOVQ 136(AX), DX // a.thin
	VMOVDQU64 (DX), Z11
	VPBROADCASTQ 144(AX), Z24 // a.add
	VPBROADCASTQ 152(AX), Z25 // a.slot
	VPBROADCASTQ 160(AX), Z26 // a.inv
	MOVQ $0x3FF0000000000000, DX
	VPBROADCASTQ DX, Z27
	MOVQ $0x8000000000000, DX
	VPBROADCASTQ DX, Z29
	KXORB K7, K7, K7

init:
	VPXORQ Z16, Z16, Z16
	VPXORQ Z9, Z9, Z9
	MOVL $1, DX
	VPBROADCASTD DX, Z8
	MOVL $31, DX
	VPBROADCASTD DX, Z12
	MOVQ $0xFF, DX
	KMOVB DX, K4
	XORQ AX, AX

loop:
	CMPQ CX, $8
	JGE  full
	TESTQ CX, CX
	JLE   done
	// The last step has CX < 8 rows.
	MOVQ  $0xFF, DX
	BZHIQ CX, DX, DX
	KMOVB DX, K4

full:
	MOVL AX, (R12)

	// x: the step's deltas, or (modeLows16) their 16-bit low parts
	// plus the exceptions' high parts, expanded into the lanes of the
	// step's exception bits.
	TESTQ $2, R11
	JNZ   lows16
	VMOVDQU64.Z (SI), K4, Z1
	ADDQ        $64, SI
	JMP         sum

lows16:
	VPMOVZXWQ.Z (SI), K4, Z1
	MOVBQZX     (R14), DX
	KMOVB       DX, K6
	VPEXPANDQ.Z (R15), K6, Z17
	VPSLLQ      $16, Z17, Z17
	VPADDQ      Z17, Z1, Z1
	POPCNTL     DX, DX
	LEAQ        (R15)(DX*8), R15
	INCQ        R14
	ADDQ        $16, SI

sum:
	// L: lane j += lane j-1, then j-2, then j-4 (VALIGNQ with zero
	// shifts lanes up). Z2 = x - L = -L[j-1].
	VALIGNQ     $7, Z9, Z1, Z2
	VPADDQ      Z2, Z1, Z2
	VALIGNQ     $6, Z9, Z2, Z3
	VPADDQ      Z3, Z2, Z2
	VALIGNQ     $4, Z9, Z2, Z3
	VPADDQ      Z3, Z2, Z3
	VPSUBQ      Z3, Z1, Z2

	// T = L + O (see above); Z16 = T for the next step.
	MOVBQZX   (R8), DX
	SHLQ      $6, DX
	VMOVDQU64 (R9)(DX*1), Z4
	VPERMI2Q  Z16, Z2, Z4
	VPADDQ    Z4, Z3, Z16

	// Times: base + g·T, and K2: from ≤ time < from+span; or, with
	// every time in range, T, which filterDeltasBlock turns into times
	// (modeThin without modeThinT: the times, to find their slots).
	VMOVDQA64 Z16, Z1
	KMOVB     K4, K2
	MOVQ      R11, DX
	ANDQ      $13, DX
	CMPQ      DX, $5
	JEQ       times
	TESTQ     $1, R11
	JNZ       live

times:
	VPMULLQ   Z21, Z16, Z1
	VPADDQ    Z20, Z1, Z1
	TESTQ     $1, R11
	JNZ       live
	VPSUBQ    Z22, Z1, Z4
	VPCMPUQ   $1, Z23, Z4, K2

live:

	// K1: the step's rows with a live code (bit code&31 of live dword
	// code>>5) and a time in range.
	VMOVDQU32.Z (BX), K4, Z5
	VPSRLD      $5, Z5, Z6
	VPERMD      Z10, Z6, Z13
	VPANDD      Z12, Z5, Z7
	VPSRLVD     Z7, Z13, Z13
	VPTESTMD    Z8, Z13, K4, K1
	KANDB       K2, K1, K1
	TESTQ       $4, R11
	JZ          store

	// modeThin. K3: the rows in range with a code of the thin set.
	VPERMD   Z11, Z6, Z13
	VPSRLVD  Z7, Z13, Z13
	VPTESTMD Z8, Z13, K2, K3

	// Z17: each row's slot, of x = Z1 + add (Z1 holds T with
	// modeThinT, else times); K3 only where |x| < 2^51.
	VPADDQ       Z24, Z1, Z14
	VPABSQ       Z14, Z18
	VPCMPUQ      $1, Z29, Z18, K3, K3
	VCVTQQ2PD    Z14, Z15
	VMULPD       Z26, Z15, Z17
	VRNDSCALEPD  $9, Z17, Z17
	VFNMADD231PD Z25, Z17, Z15
	VCMPPD       $0x1D, Z25, Z15, K5
	VADDPD       Z27, Z17, K5, Z17

	// Z19: the slot of the row before each; K5: rows whose row before
	// is thinnable (K3 shifted up one, K7 into lane 0).
	VALIGNQ   $7, Z28, Z17, Z19
	VMOVDQA64 Z17, Z28
	KSHIFTLB  $1, K3, K5
	KORB      K7, K5, K5
	KSHIFTRB  $7, K3, K7

	// Dropped: thinnable, after a thinnable row in the same slot, and
	// not a user's first row.
	KANDB    K3, K5, K5
	VCMPPD   $0, Z19, Z17, K5, K5
	KMOVB    (R8), K6
	KANDNB   K5, K6, K5
	KANDNB   K1, K5, K1

store:

	// The passing rows' times and codes, compressed to the front and
	// stored whole at k.
	VPCOMPRESSQ Z1, K1, Z1
	VMOVDQU64   Z1, (DI)(AX*8)
	VPCOMPRESSD Z5, K1, Z7
	VMOVDQU32   Y7, (R10)(AX*4)
	KMOVB       K1, DX
	MOVB        DX, (R13)
	POPCNTL     DX, DX
	ADDQ        DX, AX

	ADDQ $32, BX
	INCQ R8
	ADDQ $4, R12
	INCQ R13
	SUBQ $8, CX
	JMP  loop

done:
	MOVL AX, (R12)
	MOVB $0, (R13)
	MOVQ AX, ret+8(FP)
	VZEROUPPER
	RET

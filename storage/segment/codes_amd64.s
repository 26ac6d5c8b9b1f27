//go:build amd64 && !purego

#include "textflag.h"

// func maxUint32AVX2(p *uint32, n int) uint32
//
// The largest of the n ≥ 32 values at p (n a multiple of 32): four
// accumulators of eight lanes each (VPMAXUD), then a reduction.
TEXT ·maxUint32AVX2(SB), NOSPLIT, $0-20
	MOVQ  p+0(FP), SI
	MOVQ  n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

loop:
	VPMAXUD (SI), Y0, Y0
	VPMAXUD 32(SI), Y1, Y1
	VPMAXUD 64(SI), Y2, Y2
	VPMAXUD 96(SI), Y3, Y3
	ADDQ    $128, SI
	SUBQ    $32, CX
	JG      loop

	VPMAXUD      Y1, Y0, Y0
	VPMAXUD      Y3, Y2, Y2
	VPMAXUD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPMAXUD      X1, X0, X0
	VMOVD        X0, AX
	MOVL         AX, ret+16(FP)
	VZEROUPPER
	RET

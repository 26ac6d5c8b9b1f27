package identity

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/spurdb/spur/internal/bin"
)

// ErrOps is matched (errors.Is) by every error DecodeOps returns for bytes
// that are not a well-formed sequence of operations; those errors also
// match internal/bin's ErrCorruption and name the byte offset.
var ErrOps = errors.New("identity: bad operation bytes")

// AppendOp appends op's encoding to dst and returns the extended slice:
// one byte Kind, the uvarint length and bytes of T, the uvarint length and
// bytes of O, and Time as a varint (zigzag), every varint in its shortest
// form. op is not validated (DecodeOps refuses invalid ops).
func AppendOp(dst []byte, op Op) []byte {
	dst = append(dst, byte(op.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(op.T)))
	dst = append(dst, op.T...)
	dst = binary.AppendUvarint(dst, uint64(len(op.O)))
	dst = append(dst, op.O...)
	return binary.AppendVarint(dst, op.Time)
}

// DecodeOps decodes the operations AppendOp wrote, back to back in b, and
// calls fn with each in order. The ops' strings are copies (b is not
// retained). Truncated bytes, an unknown kind, a varint not in its
// shortest form, an id longer than MaxIDBytes or an op Validate refuses is
// an error wrapping ErrOps and bin.ErrCorruption that says the byte
// offset of the op; fn's error stops the decoding and is returned as is.
func DecodeOps(b []byte, fn func(Op) error) error {
	d := bin.NewDecoder(b, 0)
	d.Path = "identity operations"
	for d.Left() > 0 {
		start := d.Pos()
		var op Op
		op.Kind = Kind(d.U8())
		t := d.Bytes("T")
		o := d.Bytes("O")
		op.Time = d.Varint()
		if d.Err() == nil {
			if len(t) > MaxIDBytes || len(o) > MaxIDBytes {
				d.FailAt(start, "id of %d and %d bytes (at most %d)", len(t), len(o), MaxIDBytes)
			} else {
				op.T, op.O = string(t), string(o)
				if err := op.Validate(); err != nil {
					d.FailAt(start, "%v", err)
				}
			}
		}
		if err := d.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrOps, err)
		}
		if err := fn(op); err != nil {
			return err
		}
	}
	return nil
}

// replayBatch is how many decoded ops Replay applies per Apply call.
const replayBatch = 1 << 16

// Replay rebuilds the graph from the recorded ops AppendOp encoded (the
// bytes of a whole RecordedOps sequence, in order): New, DecodeOps, and
// Apply in batches of 64k ops. The graph is a pure function of the
// sequence, so persons, keys, person ids and refusals come out equal.
// Errors are DecodeOps's (wrapping ErrOps).
func Replay(b []byte) (*Graph, error) {
	g := New()
	batch := make([]Op, 0, min(replayBatch, len(b)/4+1))
	flush := func() error {
		err := g.Apply(batch, nil)
		batch = batch[:0]
		return err
	}
	err := DecodeOps(b, func(op Op) error {
		batch = append(batch, op)
		if len(batch) == replayBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, fmt.Errorf("identity: replaying %d bytes of operations: %w", len(b), err)
	}
	return g, nil
}

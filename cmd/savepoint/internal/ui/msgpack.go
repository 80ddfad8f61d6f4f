package ui

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// decodeMsgpack decodes one MessagePack value into what encoding/json can
// print: maps with non-string keys get their keys printed, binary becomes
// a "<N bytes>" string, and an extension type (LangGraph's serde encodes
// its own classes as ext) becomes {"ext": type, "value": the payload,
// decoded when it is MessagePack itself}. Nothing is ever executed.
func decodeMsgpack(b []byte) (any, error) {
	d := &mpDecoder{b: b}
	v, err := d.value(0)
	if err == nil && d.i != len(b) {
		err = fmt.Errorf("%d bytes after the value", len(b)-d.i)
	}
	return v, err
}

type mpDecoder struct {
	b []byte
	i int
}

var errShort = errors.New("the value ends early")

func (d *mpDecoder) take(n int) ([]byte, error) {
	if n < 0 || d.i+n > len(d.b) {
		return nil, errShort
	}
	p := d.b[d.i : d.i+n]
	d.i += n
	return p, nil
}

func (d *mpDecoder) uint(n int) (uint64, error) {
	p, err := d.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

func (d *mpDecoder) value(depth int) (any, error) {
	if depth > 100 {
		return nil, errors.New("nested more than 100 deep")
	}
	p, err := d.take(1)
	if err != nil {
		return nil, err
	}
	c := p[0]
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c&0xf0 == 0x80:
		return d.mapOf(int(c&0x0f), depth)
	case c&0xf0 == 0x90:
		return d.arrayOf(int(c&0x0f), depth)
	case c&0xe0 == 0xa0:
		return d.str(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := d.uint(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		if _, err := d.take(int(n)); err != nil {
			return nil, err
		}
		return fmt.Sprintf("<%d bytes>", n), nil
	case 0xc7, 0xc8, 0xc9:
		n, err := d.uint(1 << (c - 0xc7))
		if err != nil {
			return nil, err
		}
		return d.ext(int(n), depth)
	case 0xca:
		v, err := d.uint(4)
		return float64(math.Float32frombits(uint32(v))), err
	case 0xcb:
		v, err := d.uint(8)
		return math.Float64frombits(v), err
	case 0xcc, 0xcd, 0xce, 0xcf:
		v, err := d.uint(1 << (c - 0xcc))
		return v, err
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		v, err := d.uint(n)
		shift := 64 - 8*n
		return int64(v<<shift) >> shift, err
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return d.ext(1<<(c-0xd4), depth)
	case 0xd9, 0xda, 0xdb:
		n, err := d.uint(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(int(n))
	case 0xdc, 0xdd:
		n, err := d.uint(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayOf(int(n), depth)
	case 0xde, 0xdf:
		n, err := d.uint(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapOf(int(n), depth)
	}
	return nil, fmt.Errorf("byte 0x%02x at %d starts no MessagePack value", c, d.i-1)
}

func (d *mpDecoder) str(n int) (any, error) {
	p, err := d.take(n)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(p) {
		return fmt.Sprintf("<%d bytes, not UTF-8>", n), nil
	}
	return string(p), nil
}

func (d *mpDecoder) arrayOf(n, depth int) (any, error) {
	if n > len(d.b)-d.i {
		return nil, errShort
	}
	out := make([]any, 0, n)
	for range n {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *mpDecoder) mapOf(n, depth int) (any, error) {
	if n > len(d.b)-d.i {
		return nil, errShort
	}
	out := make(map[string]any, n)
	for range n {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			kb, _ := json.Marshal(k)
			ks = string(kb)
		}
		out[ks] = v
	}
	return out, nil
}

func (d *mpDecoder) ext(n, depth int) (any, error) {
	t, err := d.take(1)
	if err != nil {
		return nil, err
	}
	p, err := d.take(n)
	if err != nil {
		return nil, err
	}
	if int8(t[0]) == -1 && (n == 4 || n == 8) { // the timestamp extension
		sec := int64(binary.BigEndian.Uint32(p[len(p)-4:]))
		if n == 8 {
			sec = int64(binary.BigEndian.Uint64(p) & (1<<34 - 1))
		}
		return map[string]any{"timestamp": sec}, nil
	}
	inner := &mpDecoder{b: p}
	if v, err := inner.value(depth + 1); err == nil && inner.i == len(p) {
		return map[string]any{"ext": int8(t[0]), "value": v}, nil
	}
	return map[string]any{"ext": int8(t[0]), "value": fmt.Sprintf("<%d bytes>", n)}, nil
}

// decodedValue is a channel value, checkpoint or write as a page shows it.
type decodedValue struct {
	Type    string
	Size    int64
	Text    string // the decoded value as indented JSON; empty when not decoded
	Note    string // why it is not decoded, or that it was cut
	Decoded bool
	Cut     bool // Text holds the first 16 KiB only
}

// decodeValue decodes JSON and MessagePack values (LangGraph's serde types
// "json" and "msgpack"); any other type, pickle above all, is shown by its
// type and size only and never unpickled.
func decodeValue(typ string, data []byte, total int64) decodedValue {
	v := decodedValue{Type: typ, Size: total}
	if total < int64(len(data)) {
		v.Size = int64(len(data))
	}
	if int64(len(data)) < v.Size {
		v.Note = fmt.Sprintf("only the first %s of %s were read", formatBytes(len(data)), formatBytes(int(v.Size)))
		return v
	}
	switch typ {
	case "":
		v.Note = "no value stored"
	case "json":
		v.Text, v.Decoded = prettyJSON(string(data)), true
	case "msgpack":
		x, err := decodeMsgpack(data)
		if err != nil {
			v.Note = "not valid MessagePack: " + err.Error()
			return v
		}
		b, _ := json.MarshalIndent(x, "", "  ")
		v.Text, v.Decoded = string(b), true
	case "null", "empty":
		v.Text, v.Decoded = typ, true
	default:
		v.Note = "serde type " + typ + " is not decoded (the inspector never unpickles)"
	}
	if v.Decoded {
		if t, c := cut(v.Text); c {
			v.Text, v.Note, v.Cut = t, "cut at 16 KiB", true
		}
	}
	return v
}

package daemontest

import "bytes"

// RawFrame is a gRPC message sent and received as its encoded bytes B, so
// that a test can send what the proto codec would refuse to marshal (such
// as a string that is not UTF-8) and read the answer undecoded. Use it with
// grpc.ForceCodec(RawCodec{}).
type RawFrame struct{ B []byte }

// RawCodec is the codec of RawFrame; it calls itself "proto", so the daemon
// reads the bytes as it reads any request.
type RawCodec struct{}

// Marshal returns v's bytes; v must be a *RawFrame.
func (RawCodec) Marshal(v any) ([]byte, error) { return v.(*RawFrame).B, nil }

// Unmarshal keeps a copy of b in v, a *RawFrame.
func (RawCodec) Unmarshal(b []byte, v any) error {
	v.(*RawFrame).B = bytes.Clone(b)
	return nil
}

// Name returns "proto".
func (RawCodec) Name() string { return "proto" }

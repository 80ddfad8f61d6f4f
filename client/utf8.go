package client

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/savepoint-dev/savepoint/internal/reason"
	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// refuseInvalidUTF8 returns the error the daemon answers a request holding
// a string field that is not valid UTF-8 with (INVALID_ARGUMENT, reason
// INVALID_UTF8, metadata "field" naming the first such string, the daemon's
// message), or nil when m has none or is not a proto message. grpc-go cannot
// marshal such a request, so it would fail with a bare INTERNAL instead; the
// returned *Error is marked as never sent.
func refuseInvalidUTF8(m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	f := firstInvalidUTF8(pm.ProtoReflect())
	if f == nil {
		return nil
	}
	st := status.New(codes.InvalidArgument, f.field+": "+f.msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason.String(savepointv1.ErrorReason_ERROR_REASON_INVALID_UTF8),
		Domain:   Domain,
		Metadata: map[string]string{"field": f.field},
	}); err == nil {
		st = withInfo
	}
	e := translate(st.Err()).(*Error)
	e.unsent = true
	return e
}

// utf8Fault is the first string of a message that is not valid UTF-8: its
// path, as the daemon names it ("append_messages[0].content_json";
// a map as a whole, "labels", unless the string is in a message value,
// `m["key"].name`), and what is wrong with it.
type utf8Fault struct {
	field, msg string
}

// under puts the fault, found in a value named prefix, under that name.
func (f *utf8Fault) under(prefix string) *utf8Fault {
	f.field = prefix + f.field
	return f
}

// firstInvalidUTF8 returns the first string of m, in field declaration
// order and depth first, that proto.Marshal refuses for not being UTF-8,
// with its path relative to m; nil when there is none. Paths are built only
// for a fault, so a valid message costs a walk and the UTF-8 checks.
func firstInvalidUTF8(m protoreflect.Message) *utf8Fault {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if !m.Has(f) {
			continue
		}
		name, v := string(f.Name()), m.Get(f)
		switch {
		case f.IsMap():
			if fe := mapUTF8(f, v.Map()); fe != nil {
				return fe.under(name)
			}
		case f.IsList():
			list := v.List()
			for j := range list.Len() {
				if fe := valueUTF8(f, list.Get(j)); fe != nil {
					return fe.under(name + "[" + strconv.Itoa(j) + "]")
				}
			}
		default:
			if fe := valueUTF8(f, v); fe != nil {
				return fe.under(name)
			}
		}
	}
	return nil
}

// valueUTF8 checks one value of field f: a string, or a message to walk.
func valueUTF8(f protoreflect.FieldDescriptor, v protoreflect.Value) *utf8Fault {
	switch {
	case f.Kind() == protoreflect.StringKind:
		if checksUTF8(f) && !utf8.ValidString(v.String()) {
			return &utf8Fault{msg: "is not valid UTF-8; a string field must be, so send other data base64-encoded"}
		}
	case f.Message() != nil:
		if fe := firstInvalidUTF8(v.Message()); fe != nil {
			return fe.under(".")
		}
	}
	return nil
}

// mapUTF8 checks the entries of the map field f in key order, so that the
// same map always names the same fault.
func mapUTF8(f protoreflect.FieldDescriptor, m protoreflect.Map) *utf8Fault {
	kf, vf := f.MapKey(), f.MapValue()
	entry := func(k protoreflect.MapKey, v protoreflect.Value) *utf8Fault {
		key := fmt.Sprint(k.Interface())
		if kf.Kind() == protoreflect.StringKind {
			if checksUTF8(kf) && !utf8.ValidString(k.String()) {
				return &utf8Fault{msg: "has a key that is not valid UTF-8; a string must be"}
			}
			key = quoteKey(k.String())
		}
		switch {
		case vf.Kind() == protoreflect.StringKind:
			if checksUTF8(vf) && !utf8.ValidString(v.String()) {
				return &utf8Fault{msg: fmt.Sprintf("value of key %s is not valid UTF-8; a string must be", key)}
			}
		case vf.Message() != nil:
			if fe := firstInvalidUTF8(v.Message()); fe != nil {
				return fe.under("[" + key + "].")
			}
		}
		return nil
	}
	bad := false
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		bad = entry(k, v) != nil
		return !bad
	})
	if !bad {
		return nil
	}
	keys := make([]protoreflect.MapKey, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareMapKeys)
	for _, k := range keys {
		if fe := entry(k, m.Get(k)); fe != nil {
			return fe
		}
	}
	return nil
}

// compareMapKeys orders map keys as deterministic marshaling does.
func compareMapKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case string:
		return cmp.Compare(x, b.String())
	case bool:
		return cmp.Compare(boolInt(x), boolInt(b.Bool()))
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	default:
		return cmp.Compare(a.Uint(), b.Uint())
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checksUTF8 says whether proto.Marshal refuses invalid UTF-8 in the string
// field f: in proto3 (every Savepoint proto) it does, in proto2 it does not.
func checksUTF8(f protoreflect.FieldDescriptor) bool {
	return f.Syntax() != protoreflect.Proto2
}

// quoteKey quotes a map key for a message, cut to 64 bytes, as the daemon
// does.
func quoteKey(k string) string {
	const max = 64
	if len(k) <= max {
		return strconv.Quote(k)
	}
	n := max
	for n > 0 && !utf8.RuneStart(k[n]) {
		n--
	}
	return strconv.Quote(k[:n]) + "..."
}

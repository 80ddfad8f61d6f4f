// Package protoutf8 finds the first string of a protobuf message that is not
// valid UTF-8, and names it as the daemon's request validation names fields,
// so that the daemon (which reads such a request with its strings decoded as
// bytes) and the Go client (which refuses such a request before sending it)
// answer it alike.
package protoutf8

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// A Fault is the first string of a message that is not valid UTF-8. Field is
// its path ("append_messages[0].content_json"; a map is named as a whole,
// "labels", unless the string is inside a message value,
// `m["key"].name`), and Msg says what is wrong with it.
type Fault struct {
	Field, Msg string
}

// First returns the first string of m, a message of type md, that is not
// valid UTF-8, in md's field declaration order and depth first, or nil when
// there is none. m is either such a message or a view of one in which string
// fields are bytes fields and each map a repeated field of entry messages
// (key 1, value 2), as on the wire; m's fields are matched to md's by number.
// A map held as a map is checked in key order, so that the same map always
// names the same fault; one held as entries, in the entries' order.
func First(md protoreflect.MessageDescriptor, m protoreflect.Message) *Fault {
	return first(md, m, "")
}

func first(md protoreflect.MessageDescriptor, m protoreflect.Message, path string) *Fault {
	fields, held := md.Fields(), m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		hf := held.ByNumber(f.Number())
		if hf == nil || !m.Has(hf) {
			continue
		}
		name := string(f.Name())
		if path != "" {
			name = path + "." + name
		}
		v := m.Get(hf)
		switch {
		case f.IsMap():
			if fa := inMap(f, hf, v, name); fa != nil {
				return fa
			}
		case f.IsList():
			list := v.List()
			for j := range list.Len() {
				if fa := inValue(f, list.Get(j), name+"["+strconv.Itoa(j)+"]"); fa != nil {
					return fa
				}
			}
		default:
			if fa := inValue(f, v, name); fa != nil {
				return fa
			}
		}
	}
	return nil
}

// inValue checks one value of field f: a string, or a message to walk.
func inValue(f protoreflect.FieldDescriptor, v protoreflect.Value, path string) *Fault {
	switch {
	case f.Kind() == protoreflect.StringKind:
		if checked(f) && !valid(v) {
			return &Fault{Field: path, Msg: "is not valid UTF-8; a string field must be, so send other data base64-encoded"}
		}
	case f.Message() != nil:
		return first(f.Message(), v.Message(), path)
	}
	return nil
}

// inMap checks the map field f, held as field hf with value v, named path.
func inMap(f, hf protoreflect.FieldDescriptor, v protoreflect.Value, path string) *Fault {
	kf, vf := f.MapKey(), f.MapValue()
	entry := func(k, val protoreflect.Value) *Fault {
		key := fmt.Sprint(k.Interface())
		if kf.Kind() == protoreflect.StringKind {
			if checked(kf) && !valid(k) {
				return &Fault{Field: path, Msg: "has a key that is not valid UTF-8; a string must be"}
			}
			key = quoteKey(text(k))
		}
		switch {
		case vf.Kind() == protoreflect.StringKind:
			if checked(vf) && !valid(val) {
				return &Fault{Field: path, Msg: fmt.Sprintf("value of key %s is not valid UTF-8; a string must be", key)}
			}
		case vf.Message() != nil:
			return first(vf.Message(), val.Message(), path+"["+key+"]")
		}
		return nil
	}
	if !hf.IsMap() { // entries, as on the wire
		list := v.List()
		for j := range list.Len() {
			e := list.Get(j).Message()
			ef := e.Descriptor().Fields()
			if fa := entry(e.Get(ef.ByNumber(1)), e.Get(ef.ByNumber(2))); fa != nil {
				return fa
			}
		}
		return nil
	}
	m := v.Map()
	keys := make([]protoreflect.MapKey, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		if fa := entry(k.Value(), m.Get(k)); fa != nil {
			return fa
		}
	}
	return nil
}

// valid says whether v, a string or the bytes a view holds for one, is UTF-8.
func valid(v protoreflect.Value) bool {
	switch x := v.Interface().(type) {
	case string:
		return utf8.ValidString(x)
	case []byte:
		return utf8.Valid(x)
	}
	return true
}

func text(v protoreflect.Value) string {
	if b, ok := v.Interface().([]byte); ok {
		return string(b)
	}
	return v.String()
}

// checked says whether invalid UTF-8 in the string field f is refused: in
// proto3 (every Savepoint proto) it is, in proto2 it is not.
func checked(f protoreflect.FieldDescriptor) bool {
	return f.Syntax() != protoreflect.Proto2
}

// compareKeys orders map keys as deterministic marshaling does.
func compareKeys(a, b protoreflect.MapKey) int {
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

// quoteKey quotes a map key for a path or message, cut to 64 bytes.
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

package daemon

import (
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// bytesViews holds copies of proto files in which every string field is a
// bytes field, so that a message whose strings are not all UTF-8 still
// decodes, and the string at fault can be named. The zero value is ready; it
// builds each file's copy the first time a message of it fails to decode.
type bytesViews struct {
	mu    sync.Mutex
	files protoregistry.Files // the copies, under the originals' paths and names
}

// invalidUTF8 returns the *FieldError (INVALID_UTF8) naming the first string
// field of b, decoded as md, that is not valid UTF-8: first in declaration
// order, depth first, with the path in validation's style
// ("append_messages[0].content_json"; a map is named as a whole, "labels",
// unless the string is inside a message value, `m["key"].name`). It returns
// nil when every string is UTF-8 or b does not decode even with strings read
// as bytes.
func (v *bytesViews) invalidUTF8(md protoreflect.MessageDescriptor, b []byte) *FieldError {
	view, err := v.message(md)
	if err != nil {
		return nil
	}
	m := dynamicpb.NewMessage(view)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil
	}
	return firstInvalidUTF8(md, m, "")
}

// message returns the copy of md in which strings are bytes.
func (v *bytesViews) message(md protoreflect.MessageDescriptor) (protoreflect.MessageDescriptor, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.add(md.ParentFile()); err != nil {
		return nil, err
	}
	d, err := v.files.FindDescriptorByName(md.FullName())
	if err != nil {
		return nil, err
	}
	view, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is a %T in the copy", md.FullName(), d)
	}
	return view, nil
}

// add copies fd, and the files it imports, into v.files.
func (v *bytesViews) add(fd protoreflect.FileDescriptor) error {
	if _, err := v.files.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		if err := v.add(imports.Get(i).FileDescriptor); err != nil {
			return err
		}
	}
	fdp := protodesc.ToFileDescriptorProto(fd)
	for _, m := range fdp.GetMessageType() {
		stringsToBytes(m)
	}
	view, err := protodesc.NewFile(fdp, &v.files)
	if err != nil {
		return fmt.Errorf("copy %s with strings as bytes: %w", fd.Path(), err)
	}
	return v.files.RegisterFile(view)
}

// stringsToBytes makes every string field of m and its nested messages a
// bytes field. A map may not have bytes keys, so a map entry becomes a plain
// message: the map is then a repeated field of it, as it is on the wire.
func stringsToBytes(m *descriptorpb.DescriptorProto) {
	for _, f := range m.GetField() {
		if f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_STRING {
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
		}
	}
	if m.GetOptions().GetMapEntry() {
		m.Options.MapEntry = nil
	}
	for _, n := range m.GetNestedType() {
		stringsToBytes(n)
	}
}

// firstInvalidUTF8 walks m, a bytes view of a message of type md, for the
// first string that is not UTF-8; path is m's own path ("" at the top).
func firstInvalidUTF8(md protoreflect.MessageDescriptor, m protoreflect.Message, path string) *FieldError {
	fields := md.Fields()
	viewFields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		vf := viewFields.ByNumber(f.Number())
		if vf == nil || !m.Has(vf) {
			continue
		}
		name := string(f.Name())
		if path != "" {
			name = path + "." + name
		}
		val := m.Get(vf)
		switch {
		case f.IsMap():
			list := val.List()
			for j := range list.Len() {
				if fe := mapEntryUTF8(f, list.Get(j).Message(), name); fe != nil {
					return fe
				}
			}
		case f.IsList():
			list := val.List()
			for j := range list.Len() {
				if fe := valueUTF8(f, list.Get(j), fmt.Sprintf("%s[%d]", name, j)); fe != nil {
					return fe
				}
			}
		default:
			if fe := valueUTF8(f, val, name); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// valueUTF8 checks one value of field f: a string, or a message to walk.
func valueUTF8(f protoreflect.FieldDescriptor, v protoreflect.Value, path string) *FieldError {
	switch {
	case f.Kind() == protoreflect.StringKind:
		if !utf8.Valid(v.Bytes()) {
			return fieldErr(path, reasonInvalidUTF8, "is not valid UTF-8; a string field must be, so send other data base64-encoded")
		}
	case f.Message() != nil:
		return firstInvalidUTF8(f.Message(), v.Message(), path)
	}
	return nil
}

// mapEntryUTF8 checks one entry, e, of the map field f named path.
func mapEntryUTF8(f protoreflect.FieldDescriptor, e protoreflect.Message, path string) *FieldError {
	kf, vf := e.Descriptor().Fields().ByNumber(1), e.Descriptor().Fields().ByNumber(2)
	k := e.Get(kf)
	key := fmt.Sprint(k.Interface())
	if f.MapKey().Kind() == protoreflect.StringKind {
		if !utf8.Valid(k.Bytes()) {
			return fieldErr(path, reasonInvalidUTF8, "has a key that is not valid UTF-8; a string must be")
		}
		key = quoteKey(k.Bytes())
	}
	switch val := f.MapValue(); {
	case val.Kind() == protoreflect.StringKind:
		if !utf8.Valid(e.Get(vf).Bytes()) {
			return fieldErr(path, reasonInvalidUTF8, "value of key %s is not valid UTF-8; a string must be", key)
		}
	case val.Message() != nil:
		return firstInvalidUTF8(val.Message(), e.Get(vf).Message(), path+"["+key+"]")
	}
	return nil
}

// quoteKey quotes a map key for a path or message, cut to 64 bytes.
func quoteKey(b []byte) string {
	const max = 64
	if len(b) <= max {
		return strconv.Quote(string(b))
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return strconv.Quote(string(b[:n])) + "..."
}

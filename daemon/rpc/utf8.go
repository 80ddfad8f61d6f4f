package rpc

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/savepoint-dev/savepoint/internal/protoutf8"
)

// bytesViews holds copies of proto files in which every string field is a
// bytes field, so that a message whose strings are not all UTF-8 still
// decodes, and the string at fault can be named. The zero value is ready; it
// builds each file's copy the first time a message of it fails to decode.
type bytesViews struct {
	mu    sync.Mutex
	files protoregistry.Files // the copies, under the originals' paths and names
}

// invalidUTF8 returns the *fieldError (INVALID_UTF8) naming the first string
// field of b, decoded as md, that is not valid UTF-8: first in declaration
// order, depth first, with the path in validation's style
// ("append_messages[0].content_json"; a map is named as a whole, "labels",
// unless the string is inside a message value, `m["key"].name`). It returns
// nil when every string is UTF-8 or b does not decode even with strings read
// as bytes.
func (v *bytesViews) invalidUTF8(md protoreflect.MessageDescriptor, b []byte) *fieldError {
	view, err := v.message(md)
	if err != nil {
		return nil
	}
	m := dynamicpb.NewMessage(view)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil
	}
	if f := protoutf8.First(md, m); f != nil {
		return fieldErr(f.Field, reasonInvalidUTF8, "%s", f.Msg)
	}
	return nil
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

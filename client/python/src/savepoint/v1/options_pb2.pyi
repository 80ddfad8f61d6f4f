from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
RETRY_WITH_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
retry_with_request_id: _descriptor.FieldDescriptor

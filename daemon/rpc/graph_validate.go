package rpc

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/savepoint-dev/savepoint/daemon/core"

	savepointv1 "github.com/savepoint-dev/savepoint/proto/savepoint/v1"
)

// The reasons of GraphCheckpointService's own *fieldError values.
const (
	reasonInvalidGraphKey = savepointv1.ErrorReason_ERROR_REASON_INVALID_GRAPH_KEY
	reasonInvalidUpload   = savepointv1.ErrorReason_ERROR_REASON_INVALID_UPLOAD
)

// GraphCheckpointService's limits (docs/api.md).
const (
	maxThreadIDLen     = 512
	maxNSLen           = 512
	maxCheckpointIDLen = 256
	maxTaskIDLen       = 256
	maxTaskPathLen     = 1024
	maxChannelLen      = 512
	maxVersionLen      = 256
	maxValueTypeLen    = 64
	maxRunIDLen        = 256
	// maxGraphHeaderBytes caps a checkpoint's ids, metadata and channel
	// versions together, so that its first response message always fits the
	// response budget.
	maxGraphHeaderBytes = 1 << 20
	// MaxGraphBlobs and MaxGraphWrites cap the records one put or PutWrites
	// call writes.
	MaxGraphBlobs  = 1000
	MaxGraphWrites = 1000
	// MaxGraphIDs caps the thread ids of a Prune and the run ids of a
	// DeleteForRuns.
	MaxGraphIDs = 1000
	// MaxGraphFilterKeys caps a ListCheckpoints metadata filter.
	MaxGraphFilterKeys = 64
	// MaxUploadBytes caps the bytes of one UploadCheckpoint (1 GiB).
	MaxUploadBytes = 1 << 30
)

// graphHeaderLimit is the cap on a checkpoint's ids, metadata and channel
// versions: maxGraphHeaderBytes, or half the response budget when that is
// less.
func graphHeaderLimit(lim Limits) int { return min(maxGraphHeaderBytes, lim.ResponseBudgetBytes/2) }

// validateGraphKey checks one key field: valid UTF-8 without NUL, at most
// max bytes, and non-empty when required.
func validateGraphKey(field, s string, max int, required bool) error {
	switch {
	case s == "" && required:
		return fieldErr(field, reasonInvalidGraphKey, "is empty; it is required")
	case len(s) > max:
		return fieldErr(field, reasonInvalidGraphKey, "is %d bytes; at most %d are allowed", len(s), max)
	case !utf8.ValidString(s):
		return fieldErr(field, reasonInvalidGraphKey, "is not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return fieldErr(field, reasonInvalidGraphKey, "must not contain NUL")
	}
	return nil
}

// validateTypedValue checks a value of a unary request and returns it.
func validateTypedValue(field string, v *savepointv1.TypedValue) (core.GraphValue, error) {
	if len(v.GetType()) > maxValueTypeLen {
		return core.GraphValue{}, fieldErr(field+".type", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", len(v.GetType()), maxValueTypeLen)
	}
	if !utf8.ValidString(v.GetType()) {
		return core.GraphValue{}, fieldErr(field+".type", reasonInvalidGraphKey, "is not valid UTF-8")
	}
	n := int64(len(v.GetData()))
	if ts := v.GetTotalSize(); ts != 0 && ts != n {
		return core.GraphValue{}, fieldErr(field+".total_size", reasonInvalidArgument, "is %d but data holds %d bytes; send 0 or len(data)", ts, n)
	}
	return core.GraphValue{Type: v.GetType(), Size: n, Data: v.GetData()}, nil
}

// reasonInvalidArgument is the generic INVALID_ARGUMENT reason, for a field
// error no finer reason describes.
const reasonInvalidArgument = savepointv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT

// validateGraphCheckpoint checks a checkpoint; upload is true for an upload
// start, whose value holds no data but a declared size.
func validateGraphCheckpoint(lim Limits, field string, c *savepointv1.GraphCheckpoint, upload bool) (core.GraphCheckpoint, error) {
	if c == nil {
		return core.GraphCheckpoint{}, fieldErr(field, reasonMissingField, "is required")
	}
	for _, k := range []struct {
		name     string
		v        string
		max      int
		required bool
	}{
		{"thread_id", c.GetThreadId(), maxThreadIDLen, true},
		{"checkpoint_ns", c.GetCheckpointNs(), maxNSLen, false},
		{"checkpoint_id", c.GetCheckpointId(), maxCheckpointIDLen, true},
		{"parent_checkpoint_id", c.GetParentCheckpointId(), maxCheckpointIDLen, false},
	} {
		if err := validateGraphKey(field+"."+k.name, k.v, k.max, k.required); err != nil {
			return core.GraphCheckpoint{}, err
		}
	}
	md := c.GetMetadataJson()
	if md == "" {
		md = "{}"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(md), &obj); err != nil || obj == nil {
		return core.GraphCheckpoint{}, fieldErr(field+".metadata_json", reasonInvalidJSON, "is not a JSON object")
	}
	size := len(c.GetThreadId()) + len(c.GetCheckpointNs()) + len(c.GetCheckpointId()) + len(c.GetParentCheckpointId()) + len(md)
	for _, ch := range slices.Sorted(maps.Keys(c.GetChannelVersions())) {
		v := c.GetChannelVersions()[ch]
		if err := validateGraphKey(field+".channel_versions", ch, maxChannelLen, true); err != nil {
			return core.GraphCheckpoint{}, err
		}
		if err := validateGraphKey(fmt.Sprintf("%s.channel_versions[%q]", field, ch), v, maxVersionLen, true); err != nil {
			return core.GraphCheckpoint{}, err
		}
		size += len(ch) + len(v) + 8
	}
	if limit := graphHeaderLimit(lim); size > limit {
		return core.GraphCheckpoint{}, fieldErr(field, reasonFieldTooLarge,
			"has %d bytes of ids, metadata_json and channel_versions; at most %d are allowed", size, limit)
	}
	val, err := graphValue(field+".checkpoint", c.GetCheckpoint(), upload)
	if err != nil {
		return core.GraphCheckpoint{}, err
	}
	return core.GraphCheckpoint{
		ThreadID:        c.GetThreadId(),
		NS:              c.GetCheckpointNs(),
		ID:              c.GetCheckpointId(),
		ParentID:        c.GetParentCheckpointId(),
		Value:           val,
		ChannelVersions: c.GetChannelVersions(),
		MetadataJSON:    md,
	}, nil
}

// graphValue checks a value of a put (upload false) or an upload start.
func graphValue(field string, v *savepointv1.TypedValue, upload bool) (core.GraphValue, error) {
	if !upload {
		return validateTypedValue(field, v)
	}
	if len(v.GetData()) > 0 {
		return core.GraphValue{}, fieldErr(field+".data", reasonInvalidUpload, "must be empty in an upload start; send the bytes in chunks")
	}
	if v.GetTotalSize() < 0 {
		return core.GraphValue{}, fieldErr(field+".total_size", reasonInvalidUpload, "is negative")
	}
	gv, err := validateTypedValue(field, &savepointv1.TypedValue{Type: v.GetType()})
	gv.Size = v.GetTotalSize()
	return gv, err
}

// validateGraphPut checks a PutCheckpoint request or an upload start.
func validateGraphPut(lim Limits, c *savepointv1.GraphCheckpoint, blobs []*savepointv1.ChannelBlob, requestID string, upload bool) (*core.GraphPut, error) {
	cp, err := validateGraphCheckpoint(lim, "checkpoint", c, upload)
	if err != nil {
		return nil, err
	}
	rid, err := validateRequestID("request_id", requestID)
	if err != nil {
		return nil, err
	}
	if len(blobs) > MaxGraphBlobs {
		return nil, fieldErr("blobs", reasonFieldTooLarge, "has %d blobs; at most %d are allowed", len(blobs), MaxGraphBlobs)
	}
	p := &core.GraphPut{Checkpoint: cp, RequestID: rid}
	seen := map[[2]string]bool{}
	total := cp.Value.Size
	for i, b := range blobs {
		field := fmt.Sprintf("blobs[%d]", i)
		if err := validateGraphKey(field+".channel", b.GetChannel(), maxChannelLen, true); err != nil {
			return nil, err
		}
		if err := validateGraphKey(field+".version", b.GetVersion(), maxVersionLen, true); err != nil {
			return nil, err
		}
		k := [2]string{b.GetChannel(), b.GetVersion()}
		if seen[k] {
			return nil, fieldErr(field, reasonInvalidGraphKey, "repeats channel %q at version %q; send each blob once", k[0], k[1])
		}
		seen[k] = true
		v, err := graphValue(field+".value", b.GetValue(), upload)
		if err != nil {
			return nil, err
		}
		total += v.Size
		p.Blobs = append(p.Blobs, core.GraphBlob{Channel: b.GetChannel(), Version: b.GetVersion(), Value: v})
	}
	if upload && total > MaxUploadBytes {
		return nil, fieldErr("blobs", reasonInvalidUpload, "declare %d bytes in all; at most %d are allowed per upload", total, MaxUploadBytes)
	}
	return p, nil
}

// writesRequest is a PutWrites request or an UploadWrites start.
type writesRequest interface {
	GetThreadId() string
	GetCheckpointNs() string
	GetCheckpointId() string
	GetTaskId() string
	GetTaskPath() string
	GetRequestId() string
	GetWrites() []*savepointv1.ChannelWrite
}

// validatePutWrites checks a PutWrites request, or an UploadWrites start
// when upload is set, and returns it.
func validatePutWrites(req writesRequest, upload bool) (*core.GraphWrites, error) {
	for _, k := range []struct {
		name     string
		v        string
		max      int
		required bool
	}{
		{"thread_id", req.GetThreadId(), maxThreadIDLen, true},
		{"checkpoint_ns", req.GetCheckpointNs(), maxNSLen, false},
		{"checkpoint_id", req.GetCheckpointId(), maxCheckpointIDLen, true},
		{"task_id", req.GetTaskId(), maxTaskIDLen, true},
	} {
		if err := validateGraphKey(k.name, k.v, k.max, k.required); err != nil {
			return nil, err
		}
	}
	if len(req.GetTaskPath()) > maxTaskPathLen {
		return nil, fieldErr("task_path", reasonFieldTooLarge, "is %d bytes; at most %d are allowed", len(req.GetTaskPath()), maxTaskPathLen)
	}
	if !utf8.ValidString(req.GetTaskPath()) {
		return nil, fieldErr("task_path", reasonInvalidGraphKey, "is not valid UTF-8")
	}
	rid, err := validateRequestID("request_id", req.GetRequestId())
	if err != nil {
		return nil, err
	}
	switch n := len(req.GetWrites()); {
	case n == 0:
		return nil, fieldErr("writes", reasonMissingField, "is empty; send at least one write")
	case n > MaxGraphWrites:
		return nil, fieldErr("writes", reasonFieldTooLarge, "has %d writes; at most %d are allowed per call", n, MaxGraphWrites)
	}
	w := &core.GraphWrites{
		ThreadID: req.GetThreadId(), NS: req.GetCheckpointNs(), CheckpointID: req.GetCheckpointId(),
		TaskID: req.GetTaskId(), TaskPath: req.GetTaskPath(), RequestID: rid,
	}
	seen := map[int32]bool{}
	var total int64
	for i, x := range req.GetWrites() {
		field := fmt.Sprintf("writes[%d]", i)
		if x.GetIdx() < core.GraphIdxResume {
			return nil, fieldErr(field+".idx", reasonInvalidGraphKey, "is %d; an index is 0 or more, or one of -1 (ERROR), -2 (SCHEDULED), -3 (INTERRUPT), -4 (RESUME)", x.GetIdx())
		}
		if seen[x.GetIdx()] {
			return nil, fieldErr(field+".idx", reasonInvalidGraphKey, "repeats index %d within the call", x.GetIdx())
		}
		seen[x.GetIdx()] = true
		if err := validateGraphKey(field+".channel", x.GetChannel(), maxChannelLen, true); err != nil {
			return nil, err
		}
		v, err := graphValue(field+".value", x.GetValue(), upload)
		if err != nil {
			return nil, err
		}
		total += v.Size
		w.Writes = append(w.Writes, core.GraphWrite{TaskID: w.TaskID, TaskPath: w.TaskPath, Idx: x.GetIdx(), Channel: x.GetChannel(), Value: v})
	}
	if upload && total > MaxUploadBytes {
		return nil, fieldErr("writes", reasonInvalidUpload, "declare %d bytes in all; at most %d are allowed per upload", total, MaxUploadBytes)
	}
	return w, nil
}

// validateListCheckpoints checks a ListCheckpoints request and returns its
// query.
func validateListCheckpoints(req *savepointv1.ListCheckpointsRequest) (core.GraphListQuery, error) {
	q := core.GraphListQuery{ThreadID: req.GetThreadId(), NS: req.CheckpointNs, Before: req.GetBeforeCheckpointId(), Limit: int(req.GetLimit())}
	if err := validateGraphKey("thread_id", q.ThreadID, maxThreadIDLen, false); err != nil {
		return q, err
	}
	if err := validateGraphKey("checkpoint_ns", req.GetCheckpointNs(), maxNSLen, false); err != nil {
		return q, err
	}
	if err := validateGraphKey("before_checkpoint_id", q.Before, maxCheckpointIDLen, false); err != nil {
		return q, err
	}
	if q.Limit < 0 {
		return q, fieldErr("limit", reasonInvalidPageSize, "is negative; use 0 for no limit")
	}
	if len(req.GetMetadataFilter()) > MaxGraphFilterKeys {
		return q, fieldErr("metadata_filter", reasonFieldTooLarge, "has %d keys; at most %d are allowed", len(req.GetMetadataFilter()), MaxGraphFilterKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(req.GetMetadataFilter())) {
		v, err := core.DecodeJSONValue(req.GetMetadataFilter()[k])
		if err != nil {
			return q, fieldErr(fmt.Sprintf("metadata_filter[%q]", k), reasonInvalidJSON, "is not JSON text; send the value as JSON, such as \"input\" (quoted) or 1")
		}
		if q.Filter == nil {
			q.Filter = map[string]any{}
		}
		q.Filter[k] = v
	}
	return q, nil
}

// validateGraphIDs checks a list of thread or run ids.
func validateGraphIDs(field string, ids []string, max int) error {
	if len(ids) > MaxGraphIDs {
		return fieldErr(field, reasonFieldTooLarge, "has %d ids; at most %d are allowed per call", len(ids), MaxGraphIDs)
	}
	for i, id := range ids {
		if err := validateGraphKey(fmt.Sprintf("%s[%d]", field, i), id, max, true); err != nil {
			return err
		}
	}
	return nil
}

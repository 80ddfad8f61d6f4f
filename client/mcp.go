package client

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EffectClassFromMCP returns the effect class of an MCP tool from its
// annotations (the Model Context Protocol's ToolAnnotations object, as JSON):
// ReadOnly when readOnlyHint is true, else Idempotent when idempotentHint is
// true, else SideEffect, the safe assumption (MCP's default for both hints
// is false). A hint counts only when it is the JSON boolean true; null or
// empty annotations mean SideEffect. Annotations that are not a JSON object
// are an error. With an SDK's annotations struct, pass its json.Marshal.
func EffectClassFromMCP(annotations json.RawMessage) (EffectClass, error) {
	trimmed := bytes.TrimSpace(annotations)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return SideEffect, nil
	}
	var hints map[string]any
	if err := json.Unmarshal(trimmed, &hints); err != nil {
		return SideEffect, fmt.Errorf("savepoint: MCP tool annotations are not a JSON object: %w", err)
	}
	switch {
	case hints["readOnlyHint"] == true:
		return ReadOnly, nil
	case hints["idempotentHint"] == true:
		return Idempotent, nil
	default:
		return SideEffect, nil
	}
}

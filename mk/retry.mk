# Retry safety is declared once, per RPC, in the proto (idempotency_level and
# retry_with_request_id, proto/savepoint/v1/options.proto). The Go and Python
# clients read it from their generated descriptors at run time; ts-proto's
# output carries no method options, so the TypeScript client's table is
# written from the Go descriptors here, after generate-go.

TS_RETRY_RULES := client/typescript/src/retry_rules.ts

GENERATE_TARGETS += generate-retry-rules
GENERATED_PATHS += $(TS_RETRY_RULES)

.PHONY: generate-retry-rules
generate-retry-rules: ## Write the TypeScript client's retry table from the proto's declarations (tools/retryrules)
	go run ./tools/retryrules $(TS_RETRY_RULES)

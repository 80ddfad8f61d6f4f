# The public API's compatibility check. proto/savepoint/v1/api.binpb is the
# committed descriptor image of proto/savepoint/v1 (the storage records are
# not in it); `make lint` fails when the protos break it under buf's FILE
# rules (buf.yaml). Additions pass, so the image only needs rebuilding, with
# `make api-image`, as the deliberate step that accepts a grown API: commit
# the image with the protos. `make generate` never rebuilds it, or the check
# could not fail.

API_IMAGE := proto/savepoint/v1/api.binpb

.PHONY: breaking
breaking: $(BIN)/buf ## Fail if proto/ breaks the committed API image (proto/savepoint/v1/api.binpb)
	@test -f $(API_IMAGE) || { echo "breaking: $(API_IMAGE) is missing; make api-image" >&2; exit 1; }
	$(BIN)/buf breaking --against $(API_IMAGE)

.PHONY: api-image
api-image: $(BIN)/buf ## Rebuild the API image that `make breaking` compares with; commit it when the API grows
	$(BIN)/buf build --path proto/savepoint/v1 --exclude-source-info -o $(API_IMAGE)

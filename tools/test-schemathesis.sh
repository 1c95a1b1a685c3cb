#!/usr/bin/env bash
# Fuzzes a live `memkv serve` against its own GET /openapi.json with schemathesis (PyPI, pinned,
# in a venv this script creates): no 5xx, no status, header, content type or body outside the
# document, and no store changed by a rejected request (tools/schemathesis/memkv_hooks.py).
# Bounded: SCHEMATHESIS_EXAMPLES cases per operation (default 25), SCHEMATHESIS_SECONDS in all
# (default 30). /mcp (MCP's own protocol) is left to tools/test-mcp.sh, and registering webhooks
# to tests of their own (a fuzzed URL would send deliveries off the machine). Loopback only; the
# server is stopped (SIGTERM, exit 0 required) at the end.
# MEMKV_PREPARE_ONLY=1 stops once the virtualenv is ready (tools/test.sh, while cargo builds).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.32.5
# The document is first checked against the OpenAPI 3.1 specification by a published validator.
VALIDATOR=0.9.0
VENV=$(realpath -m "${MEMKV_SCHEMATHESIS_VENV:-target/schemathesis-venv}")
if [ ! -x "$VENV/bin/schemathesis" ] || ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$VERSION"; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "schemathesis==$VERSION"
fi
if ! "$VENV/bin/pip" show openapi-spec-validator 2>/dev/null | grep -q "^Version: $VALIDATOR$"; then
    "$VENV/bin/pip" install --quiet "openapi-spec-validator==$VALIDATOR"
fi
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0

if [ -n "${MEMKV_BIN:-}" ]; then
    MEMKV=$MEMKV_BIN
else
    cargo build --quiet --locked -p memkv-cli
    MEMKV="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/memkv"
fi
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

DB="$WORK/memkv.redb"
KEY=$("$MEMKV" --db "$DB" keys add --admin | tail -n 1)
"$MEMKV" --db "$DB" serve --listen 127.0.0.1:0 --max-file-bytes 4096 >"$WORK/stdout" 2>"$WORK/stderr" &
SERVER_PID=$!
for _ in $(seq 1 300); do
    [ -s "$WORK/stdout" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/stderr" >&2; exit 1; }
    sleep 0.1
done
URL=$(sed -n 's/^listening on //p' "$WORK/stdout")
[ -n "$URL" ] || { echo "the server did not start" >&2; cat "$WORK/stderr" >&2; exit 1; }

# The document itself, against the OpenAPI 3.1 specification (openapi-spec-validator).
"$VENV/bin/python" - "$URL/openapi.json" <<'PY'
import json, sys, urllib.request
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
with urllib.request.urlopen(sys.argv[1], timeout=30) as r:
    document = json.load(r)
try:
    validate(document)
except OpenAPIValidationError as e:
    sys.exit(f"GET /openapi.json is not a valid OpenAPI 3.1 document: {e}")
print(f"GET /openapi.json: a valid OpenAPI {document['openapi']} document, {len(document['paths'])} paths")
PY

# Run from the temporary directory: schemathesis keeps its caches in the working directory.
ROOT=$PWD
cd "$WORK"
MEMKV_URL="$URL" MEMKV_KEY="$KEY" PYTHONPATH="$ROOT/tools/schemathesis" SCHEMATHESIS_HOOKS=memkv_hooks \
    "$VENV/bin/schemathesis" run "$URL/openapi.json" \
    --header "x-api-key: $KEY" \
    --exclude-path /mcp \
    --exclude-operation-id webhooks_create \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,rejected_requests_change_nothing \
    --max-examples "${SCHEMATHESIS_EXAMPLES:-25}" \
    --max-time "${SCHEMATHESIS_SECONDS:-30}" \
    --request-timeout 30 \
    --workers 1 \
    --generation-database none \
    --no-color

cd "$ROOT"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=
"$MEMKV" --db "$DB" check

#!/bin/sh
# TEST-ONLY `minio`: takes MinIO's `server DIR [--console-address ADDR]` and serves S3 on :9000
# with moto (any credentials are accepted; no console).
set -eu
[ "${1:-}" = server ] || { echo "minio stand-in: only 'server DIR ...' is supported" >&2; exit 2; }
exec /opt/moto/bin/moto_server -H 0.0.0.0 -p 9000

#!/bin/sh
# TEST-ONLY `mc`: `mc ready ALIAS` exits 0 once the S3 server on :9000 answers HTTP (any status).
set -eu
[ "${1:-}" = ready ] || { echo "mc stand-in: only 'mc ready ALIAS' is supported" >&2; exit 2; }
exec /opt/moto/bin/python - <<'PY'
import urllib.error, urllib.request
try:
    urllib.request.urlopen("http://127.0.0.1:9000/", timeout=3)
except urllib.error.HTTPError:
    pass  # an S3 error answer (no credentials) is still an answer
PY

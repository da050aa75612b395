#!/usr/bin/env bash
# make compose-check: build every image of docker-compose.yml on this machine (no registry), start
# the stack on a private Docker daemon, train the demo experiment through nginx with web and
# worker restarts mid-trial (compose_check.py), then remove everything and put the host back.
#
#   deploy/compose-check/run.sh [--keep-images]
#
# --keep-images (make compose-check KEEP=1) leaves the images and the build cache in
# var/compose-check/docker for the next run; containers, networks, volumes and the daemon are
# removed either way. Needs root, docker.io, docker-compose and debootstrap (Debian packages).
# Per-phase seconds and one JSON summary line at the end, also written to var/compose-check.json.
set -euo pipefail

CC_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC_STATE="$CC_ROOT/var/compose-check"
CC_EXEC_ROOT=/run/headway-compose-check
CC_SOCK="$CC_STATE/run/docker.sock"
CC_PROJECT=headway-compose-check
CC_KEEP=0
[ "${1:-}" = --keep-images ] && CC_KEEP=1
PY="$CC_ROOT/.venv/bin/python"
CHECK="$CC_ROOT/deploy/compose-check/compose_check.py"

# shellcheck source=deploy/compose-check/daemon.sh
. "$CC_ROOT/deploy/compose-check/daemon.sh"
# shellcheck source=deploy/compose-check/images.sh
. "$CC_ROOT/deploy/compose-check/images.sh"

missing=()
[ "$(id -u)" = 0 ] || { echo "compose-check: run as root (it starts dockerd)" >&2; exit 2; }
[ -x "$CC_DOCKER" ] && [ -x "$CC_DOCKERD" ] || missing+=(docker.io)
command -v docker-compose > /dev/null || missing+=(docker-compose)
command -v debootstrap > /dev/null || missing+=(debootstrap)
command -v iptables > /dev/null || missing+=(iptables)
if [ ${#missing[@]} -gt 0 ]; then
  echo "compose-check: missing ${missing[*]}: apt-get install -y ${missing[*]}" >&2
  exit 2
fi
[ -x "$PY" ] || { echo "compose-check: no $PY: run make install first" >&2; exit 2; }
for port in 8000 9000 9001; do
  if "$PY" -c "import socket, sys; s = socket.socket(); sys.exit(s.connect_ex(('127.0.0.1', $port)) != 0)"; then
    echo "compose-check: port $port is in use here; docker-compose.yml publishes it" >&2
    exit 2
  fi
done
if [ -S "$CC_SOCK" ] && "$CC_DOCKER" -H "unix://$CC_SOCK" version > /dev/null 2>&1; then
  echo "compose-check: a daemon already answers on $CC_SOCK (another run?)" >&2
  exit 2
fi

mkdir -p "$CC_STATE/run"
PHASES="$CC_STATE/run/phases.tsv"
CHECKS="$CC_STATE/run/checks.tsv"
RESULT="$CC_STATE/run/result.json"
: > "$PHASES"; : > "$CHECKS"; rm -f "$RESULT"
CC_INDEX_PID=
CC_FAILED_PHASE=

# Runs "$@" as phase NAME and records its seconds; the first failing phase is remembered.
phase() {
  local name=$1 start rc=0
  shift
  start=$(date +%s.%N)
  echo "== $name"
  "$@" || rc=$?
  awk -v n="$name" -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%s\t%.1f\n", n, b - a}' >> "$PHASES"
  if [ "$rc" != 0 ] && [ -z "$CC_FAILED_PHASE" ]; then CC_FAILED_PHASE=$name; fi
  return "$rc"
}

compose() {
  docker-compose -p "$CC_PROJECT" -f "$CC_ROOT/docker-compose.yml" \
    --env-file "$CC_STATE/run/compose.env" "$@"
}

remove_all() {
  [ -n "$CC_INDEX_PID" ] && kill "$CC_INDEX_PID" 2>/dev/null
  if "$CC_DOCKER" version > /dev/null 2>&1; then
    compose logs --no-color > "$CC_STATE/compose.log" 2>&1 || true
    compose down --volumes --remove-orphans --timeout 10 > /dev/null 2>&1 || true
    if [ "$CC_KEEP" = 0 ]; then
      # shellcheck disable=SC2046
      "$CC_DOCKER" rmi -f $(cc_built_images) > /dev/null 2>&1 || true
    fi
  fi
  cc_daemon_stop_and_clean
  [ "$CC_KEEP" = 1 ] || rm -rf "$CC_STATE/docker"
  rm -rf "$CC_STATE/standins-context" "$CC_STATE/run/compose.env"
  cc_daemon_verify >> "$CHECKS"
}

finish() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  phase cleanup remove_all
  "$PY" "$CHECK" summary --phases "$PHASES" --checks "$CHECKS" --result "$RESULT" \
    --failed-phase "$CC_FAILED_PHASE" --out "$CC_ROOT/var/compose-check.json"
  local summary_rc=$?
  [ "$rc" = 0 ] && rc=$summary_rc
  exit "$rc"
}
trap finish EXIT
trap 'CC_FAILED_PHASE=${CC_FAILED_PHASE:-interrupted}; exit 130' INT TERM

# The generated settings compose refuses to start without (never the published defaults).
umask 077
"$PY" -c 'import secrets
print(f"SECRET_KEY={secrets.token_urlsafe(40)}")
print(f"MINIO_ROOT_USER=hcc-{secrets.token_hex(6)}")
print(f"MINIO_ROOT_PASSWORD={secrets.token_urlsafe(24)}")' > "$CC_STATE/run/compose.env"
umask 022

phase daemon cc_daemon_start
phase base_image cc_base_image
phase standin_images cc_standin_images
phase project_image cc_project_image
# up-to-healthy, training and restarts: compose_check.py records those phases itself.
"$PY" "$CHECK" run --project "$CC_PROJECT" --compose-file "$CC_ROOT/docker-compose.yml" \
  --env-file "$CC_STATE/run/compose.env" --example "$CC_ROOT/examples/digits" \
  --work "$CC_STATE/run" --result "$RESULT" || { CC_FAILED_PHASE=${CC_FAILED_PHASE:-stack}; exit 1; }

#!/bin/sh
# TEST-ONLY: what the official postgres image's entrypoint does that docker-compose.yml relies on:
# a first start initialises $PGDATA with POSTGRES_USER (password POSTGRES_PASSWORD) and creates
# POSTGRES_DB; every start serves on all addresses as the postgres user.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_PASSWORD:?}" "${POSTGRES_DB:=$POSTGRES_USER}"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" \
      | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
[ "${1:-postgres}" = postgres ] && shift || true
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" \
  -c listen_addresses='*' "$@"

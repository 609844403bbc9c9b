#!/bin/sh
# Initialise a trust-auth cluster on first start, then run the server in the foreground.
set -e
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --no-sync >/dev/null
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  echo "fsync = off" >> "$PGDATA/postgresql.conf"
  echo "synchronous_commit = off" >> "$PGDATA/postgresql.conf"
  echo "full_page_writes = off" >> "$PGDATA/postgresql.conf"
  echo "host all all 0.0.0.0/0 trust" >> "$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" "$@"

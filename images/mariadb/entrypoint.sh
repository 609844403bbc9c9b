#!/bin/sh
# Initialise an empty data folder on first start (root may log in from the sandbox's network
# without a password, as the other images trust it), then run the server in the foreground.
set -e
DATADIR=/var/lib/mysql
if [ ! -d "$DATADIR/mysql" ]; then
  mariadb-install-db --datadir="$DATADIR" --user=mysql --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve >/dev/null
  cat > /run/mysqld/init.sql <<'SQL'
CREATE USER IF NOT EXISTS 'root'@'%';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
  set -- --init-file=/run/mysqld/init.sql "$@"
fi
exec mariadbd --datadir="$DATADIR" --socket=/run/mysqld/mysqld.sock \
  --pid-file=/run/mysqld/mysqld.pid --bind-address=0.0.0.0 --port=3306 \
  --skip-name-resolve --skip-log-bin --performance-schema=off \
  --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-buffer-pool-size=64M \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci "$@"

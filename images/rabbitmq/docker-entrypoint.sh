#!/bin/sh
# Like the official rabbitmq image: RABBITMQ_DEFAULT_USER/PASS become the
# first boot's user (a conf.d file), the node runs as the rabbitmq user,
# its log on stdout. Other commands run as given.
set -eu
[ $# -gt 0 ] || set -- rabbitmq-server
if [ "$1" != rabbitmq-server ]; then exec "$@"; fi
if [ "$(id -u)" = 0 ]; then
  if [ -n "${RABBITMQ_DEFAULT_USER:-}" ] || [ -n "${RABBITMQ_DEFAULT_PASS:-}" ]; then
    {
      [ -z "${RABBITMQ_DEFAULT_USER:-}" ] || printf 'default_user = %s\n' "$RABBITMQ_DEFAULT_USER"
      [ -z "${RABBITMQ_DEFAULT_PASS:-}" ] || printf 'default_pass = %s\n' "$RABBITMQ_DEFAULT_PASS"
    } > /etc/rabbitmq/conf.d/05-env-default-user.conf
    chmod 600 /etc/rabbitmq/conf.d/05-env-default-user.conf
  fi
  chown -R rabbitmq:rabbitmq /etc/rabbitmq /var/lib/rabbitmq
  exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups "$0" "$@"
fi
shift
# /usr/lib/rabbitmq/bin/rabbitmq-server: Debian's /usr/sbin one would su.
exec /usr/lib/rabbitmq/bin/rabbitmq-server "$@"

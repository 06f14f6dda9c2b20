#!/bin/sh
# The compose Redis with one ACL user per gateway (docs/redis.md, Production Redis): asg-prod may touch only
# asg:prod:* keys and channels, asg-staging only asg:staging:*, each with exactly the rules of
# gateway-acl.txt and its password from a Docker secret. The default user can only PING (the
# healthcheck), so a client without a password reads and writes nothing.
# The paths can be moved by the environment so that a test runs this very script outside Docker;
# arguments are passed on to redis-server.
set -eu
rules_file=${ACL_RULES_FILE:-/etc/redis-acl/gateway-acl.txt}
secrets=${SECRETS_DIR:-/run/secrets}
acl_file=${ACL_FILE:-/data/users.acl}
rules=$(cat "$rules_file")
user() { # name namespace password-file
  password=$(cat "$3")
  case "$password" in
    '' | *[[:space:]]*) echo "compose-redis: $3 must hold one password without spaces" >&2; exit 1 ;;
  esac
  printf 'user %s on >%s %s\n' "$1" "$password" "$(printf '%s' "$rules" | sed "s/{namespace}/$2/g")"
}
umask 077
{
  echo 'user default on nopass -@all +ping'
  user asg-prod asg:prod "$secrets/prod_redis_password"
  user asg-staging asg:staging "$secrets/staging_redis_password"
} > "$acl_file"
# The image's entrypoint drops from root to the redis user before it starts the server.
exec ${REDIS_ENTRYPOINT-docker-entrypoint.sh} redis-server --appendonly yes --appendfsync everysec --aclfile "$acl_file" "$@"

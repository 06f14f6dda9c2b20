#!/bin/sh
# Makes the Docker secrets docker-compose.yml reads (./secrets/<name>), each a fresh random value,
# and leaves any that already exist alone. Hex, so that each is also a valid Redis ACL password
# (no spaces) and at least the 32 characters the gateway requires of a token or signing secret.
set -eu
cd "$(dirname "$0")/.."
dir=${SECRETS_DIR:-secrets}
mkdir -p "$dir"
chmod 700 "$dir"
for name in prod_admin_token prod_signing_secret prod_redis_password \
            staging_admin_token staging_signing_secret staging_redis_password grafana_admin_password; do
  file="$dir/$name"
  [ -s "$file" ] && continue
  openssl rand -hex 32 > "$file"
  # Compose mounts each file as it is; the gateway runs as the image's node user, not as you.
  chmod 644 "$file"
  echo "made $file"
done

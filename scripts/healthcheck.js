#!/usr/bin/env node
// Container HEALTHCHECK: GET /healthz on the admin listener (gateway) or, with
// HEALTHCHECK_URL set, on any other URL (the inventory uses its own port).
'use strict';
const url = process.env.HEALTHCHECK_URL || `http://127.0.0.1:${process.env.ADMIN_PORT || 8081}/healthz`;
fetch(url, { signal: AbortSignal.timeout(2500) })
  .then((res) => process.exit(res.ok ? 0 : 1))
  .catch(() => process.exit(1));

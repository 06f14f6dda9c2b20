import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { DeprecationConfig } from '../config';
import { BASE_PATH } from '../public-api';
import { CounterTally, HistogramTally } from './metric-tally';

/**
 * The circuit breaker's three states (src/gateway/upstream/circuit-breaker.ts), with the value
 * gateway_upstream_circuit_state reports for each: the higher, the less traffic reaches the upstream.
 */
export const CIRCUIT_STATES = { closed: 0, half_open: 1, open: 2 } as const;
type CircuitState = keyof typeof CIRCUIT_STATES;

/** The upstream's label in the circuit metrics: one upstream, one breaker (upstream.url). */
export const UPSTREAM_LABEL = 'inventory';

/**
 * Buckets for a reverse proxy: the gateway's own overhead sits well under a millisecond, a healthy
 * upstream answers in a few milliseconds, and the slowest interesting answers approach the 10 s
 * upstream timeout.
 */
export const PROXY_LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Every metric of CONTRACT §6, registered on one registry that the admin listener serves. */
export interface GatewayMetricSources {
  /** Keys banned now, read at scrape time for `gateway_active_bans`. */
  activeBans?: () => Promise<number>;
  /**
   * The deprecations of the config in force, read at scrape time for
   * `gateway_deprecation_sunset_timestamp_seconds`, so that an alert can join calls to a deprecated
   * route with how close its sunset is. Never touched by a request.
   */
  deprecations?: () => readonly DeprecationConfig[];
  /** The guarded forwarder, read at scrape time: its breaker's state and the requests it holds. */
  upstream?: () => { circuitState(): CircuitState; inFlight(): number };
  /** The leasing limiter's counts, read at scrape time (null: no leases in this process). */
  leases?: () => LeaseFigures | null;
}

/** What leases did (src/limits/leases/): units by outcome, and admitted requests by who decided them. */
export interface LeaseFigures {
  units: Readonly<Record<'taken' | 'used' | 'returned' | 'expired', number>>;
  admissions: { lease: number; store: number };
}

/**
 * How often prom-client samples the event loop's delay (nodejs_eventloop_lag_*). Its default, 10 ms,
 * is a timer waking every process (every worker under WORKERS > 1) 100 times a second: 6.7 ms of
 * CPU a second on an idle process of this machine, against 0.25 ms without it. 100 ms still sees
 * any stall an operator acts on.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

export function createGatewayMetrics(registry: Registry = new Registry(), sources: GatewayMetricSources = {}) {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return {
    registry,
    ...requestMetrics(registry, sources),
    ...upstreamMetrics(registry, sources),
    ...limiterMetrics(registry, sources),
    ...authMetrics(registry),
    ...storeMetrics(registry),
    ...storageMetrics(registry),
  };
}

/**
 * Requests answered, their time, what the inventory answered, and calls to deprecated operations.
 * The three the request path feeds for every request are tallies (metric-tally.ts): plain counts
 * there, handed to prom-client at scrape time; `httpRequests`, `httpDuration` and `upstreamDuration`
 * are the prom-client metrics themselves, for readers and for callers off the request path.
 */
function requestMetrics(registry: Registry, sources: GatewayMetricSources) {
  const requestCounts = new CounterTally({
    name: 'gateway_http_requests_total',
    help: 'Requests answered by the gateway.',
    labelNames: ['method', 'route', 'status_code', 'plan'] as const,
    registers: [registry],
  });
  const requestDurations = new HistogramTally({
    name: 'gateway_http_request_duration_seconds',
    help: 'Time from request to response end at the gateway.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: PROXY_LATENCY_BUCKETS,
    registers: [registry],
  });
  const upstreamDurations = new HistogramTally({
    name: 'gateway_upstream_request_duration_seconds',
    help: 'Time from forwarding a request to the upstream response headers.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: PROXY_LATENCY_BUCKETS,
    registers: [registry],
  });
  // The decision listener's answers (CONTRACT §11): a decision is not a request the gateway served, so
  // it is counted apart, with the same labels; the limiter's own metrics count both alike.
  const decisionCounts = new CounterTally({
    name: 'gateway_authz_decisions_total',
    help: 'Decisions the external-authorization listener answered for an edge proxy (200: allowed), by the original request.',
    labelNames: ['method', 'route', 'status_code', 'plan'] as const,
    registers: [registry],
  });
  const decisionDurations = new HistogramTally({
    name: 'gateway_authz_decision_duration_seconds',
    help: 'Time from a decision request to its answer at the external-authorization listener.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: PROXY_LATENCY_BUCKETS,
    registers: [registry],
  });
  return {
    requestCounts,
    decisionCounts,
    decisionDurations,
    httpRequests: requestCounts.metric,
    requestDurations,
    httpDuration: requestDurations.metric,
    upstreamDurations,
    upstreamDuration: upstreamDurations.metric,
    upstreamErrors: new Counter({
      name: 'gateway_upstream_errors_total',
      help: 'Forwarding failures, by reason (overloaded and circuit_open: refused by the gateway without sending).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    deprecatedRequests: new Counter({
      name: 'gateway_deprecated_requests_total',
      help: 'Requests to deprecated operations.',
      labelNames: ['route', 'plan'] as const,
      registers: [registry],
    }),
    deprecationSunset: sunsetGauge(registry, sources),
  };
}

/** The circuit breaker in front of the inventory and the requests it holds. */
function upstreamMetrics(registry: Registry, sources: GatewayMetricSources) {
  return {
    upstreamCircuitState: new Gauge({
      name: 'gateway_upstream_circuit_state',
      help: 'The circuit breaker in front of the upstream: 0 closed, 1 half-open (probing), 2 open (nothing sent).',
      labelNames: ['upstream'] as const,
      registers: [registry],
      // Over workers: the worst of them.
      aggregator: 'max',
      collect() {
        // Read at scrape time: an open circuit turns half-open by the clock, with or without traffic.
        if (sources.upstream) this.set({ upstream: UPSTREAM_LABEL }, CIRCUIT_STATES[sources.upstream().circuitState()]);
      },
    }),
    upstreamCircuitTransitions: new Counter({
      name: 'gateway_upstream_circuit_transitions_total',
      help: 'Circuit breaker transitions, by the state entered.',
      labelNames: ['upstream', 'to'] as const,
      registers: [registry],
    }),
    upstreamInFlight: new Gauge({
      name: 'gateway_upstream_in_flight',
      help: 'Requests at or waiting for the upstream right now (bounded by upstream.maxSockets + upstream.maxPending).',
      registers: [registry],
      collect() {
        if (sources.upstream) this.set(sources.upstream().inFlight());
      },
    }),
  };
}

/**
 * The limiter's decisions: refusals, keys near a limit, shadowed refusals, bans, requests served
 * unlimited, and the units admitted requests took (config `costs`), by route, so that an operator
 * sees which operations spend the quotas.
 */
function limiterMetrics(registry: Registry, sources: GatewayMetricSources) {
  const unitsTally = new CounterTally({
    name: 'gateway_ratelimit_units_consumed_total',
    help: "Units of every window of its key an admitted request took (its operation's cost, 1 unless config costs says more), by route template and plan.",
    labelNames: ['route', 'plan'] as const,
    registers: [registry],
  });
  return {
    rejections: new Counter({
      name: 'gateway_ratelimit_rejections_total',
      help: 'Requests refused with 429, by plan and by the window that refused (minute, day, month, ban, anonymous).',
      labelNames: ['plan', 'window'] as const,
      registers: [registry],
    }),
    nearLimit: new Counter({
      name: 'gateway_ratelimit_near_limit_total',
      help: 'Admitted requests that took a key past 80% of a window.',
      labelNames: ['plan', 'window'] as const,
      registers: [registry],
    }),
    shadowDenied: new Counter({
      name: 'gateway_ratelimit_shadow_denied_total',
      help: 'Requests a shadowed limit would have refused (window minute, day, month or ban), forwarded anyway.',
      labelNames: ['plan', 'window'] as const,
      registers: [registry],
    }),
    inFlightRejections: new Counter({
      name: 'gateway_inflight_rejections_total',
      help: 'Requests refused with 429 concurrency_limited: the key (or its plan) had maxInFlight requests being forwarded already.',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    keyBans: new Counter({
      name: 'gateway_key_bans_total',
      help: 'Keys banned for retrying after 429.',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
    // Fed by the request path as a tally (metric-tally.ts): `unitsConsumed` is the Counter it feeds.
    unitsConsumed: unitsTally.metric,
    unitsTally,
    activeBans: new Gauge({
      name: 'gateway_active_bans',
      help: 'API keys banned right now, across every instance sharing the store.',
      registers: [registry],
      // Every worker reads the same shared count: summing over workers would multiply it.
      aggregator: 'max',
      async collect() {
        if (!sources.activeBans) return;
        // A scrape during a store outage keeps the last value rather than failing the whole scrape.
        try {
          this.set(await sources.activeBans());
        } catch {
          /* kept */
        }
      },
    }),
    ...leaseMetrics(registry, sources),
    unenforced: new Counter({
      name: 'gateway_ratelimit_unenforced_total',
      help: 'Requests served without limits because the store was unreachable (store.failMode open).',
      labelNames: ['plan'] as const,
      registers: [registry],
    }),
  };
}

/** Leases of units (docs/scaling.md "Leases"): counts the leasing limiter keeps, copied at scrape time. */
function leaseMetrics(registry: Registry, sources: GatewayMetricSources) {
  return {
    leaseUnits: new Counter({
      name: 'gateway_lease_units_total',
      help: 'Units leases took (taken) and what became of them: used by admitted requests, returned to their windows, expired (left counted).',
      labelNames: ['outcome'] as const,
      registers: [registry],
      collect() {
        const figures = sources.leases?.();
        if (!figures) return;
        this.reset();
        for (const [outcome, units] of Object.entries(figures.units)) this.inc({ outcome }, units);
      },
    }),
    leaseAdmissions: new Counter({
      name: 'gateway_lease_admissions_total',
      help: 'Admitted requests of keys leases may serve, by what decided them: lease (no Redis round trip) or store.',
      labelNames: ['decided_by'] as const,
      registers: [registry],
      collect() {
        const figures = sources.leases?.();
        if (!figures) return;
        this.reset();
        this.inc({ decided_by: 'lease' }, figures.admissions.lease);
        this.inc({ decided_by: 'store' }, figures.admissions.store);
      },
    }),
  };
}

/** Refused API keys and admin tokens, by reason. */
function authMetrics(registry: Registry) {
  return {
    authFailures: new Counter({
      name: 'gateway_auth_failures_total',
      help: 'Requests refused with 401, by reason.',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    accessDenied: new Counter({
      name: 'gateway_access_denied_total',
      help: "Requests refused with 403 by a key's or its consumer's access policy, by reason (operation, address) and plan.",
      labelNames: ['reason', 'plan'] as const,
      registers: [registry],
    }),
    adminAuthFailures: new Counter({
      name: 'gateway_admin_auth_failures_total',
      help: 'Admin API requests refused for their token, by reason (missing, invalid, locked_out).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
  };
}

/** The shared store (Redis): failed calls, and whether the limiter runs on its fallback. */
function storeMetrics(registry: Registry) {
  return {
    storeErrors: new Counter({
      name: 'gateway_store_errors_total',
      help: 'Failed calls to the key or limit store.',
      registers: [registry],
    }),
    storeDegraded: new Gauge({
      name: 'gateway_store_degraded',
      help: '1 while the limiter runs on its fallback because the store is unreachable.',
      registers: [registry],
      // Over workers: 1 while any of them is degraded.
      aggregator: 'max',
    }),
  };
}

/**
 * The single-instance mode's own SQLite files (keys, audit, key-usage): failed statements by SQLite
 * code (SQLITE_FULL, SQLITE_READONLY, SQLITE_BUSY, SQLITE_IOERR_*, …) and what was given up on.
 */
function storageMetrics(registry: Registry) {
  const sqliteErrors = new Counter({
    name: 'gateway_sqlite_errors_total',
    help: "Failed statements on the gateway's own SQLite files, by database and SQLite result code.",
    labelNames: ['database', 'code'] as const,
    registers: [registry],
  });
  // At 0 from the start for the keys file on a full disk, so SqliteWritesFailing's increase() has a series to watch.
  sqliteErrors.inc({ database: 'keys', code: 'SQLITE_FULL' }, 0);
  return {
    sqliteErrors,
    keyUsageDropped: new Counter({
      name: 'gateway_key_usage_dropped_total',
      help: 'Requests whose usage counts were given up on after the usage store refused them (beyond what is kept for retries).',
      registers: [registry],
    }),
    auditDropped: new Counter({
      name: 'gateway_audit_entries_dropped_total',
      help: 'Audit entries given up on while the audit file refused writes (beyond the 1,000 kept for retries).',
      registers: [registry],
    }),
  };
}

/**
 * One sample per deprecated operation: its sunset as Unix seconds, labelled with the same route
 * template as `gateway_deprecated_requests_total` (so the two join on `route`) and its method.
 */
function sunsetGauge(registry: Registry, sources: GatewayMetricSources): Gauge<'method' | 'route'> {
  return new Gauge({
    name: 'gateway_deprecation_sunset_timestamp_seconds',
    help: 'Sunset instant (Unix seconds) of each deprecated operation, from config.',
    labelNames: ['method', 'route'] as const,
    registers: [registry],
    // Every worker exports the same config: one copy, not the sum.
    aggregator: 'first',
    collect() {
      // The deprecations in force only: a reload may have removed some.
      this.reset();
      for (const deprecation of sources.deprecations?.() ?? []) {
        this.set(
          { method: deprecation.method, route: BASE_PATH + deprecation.path },
          Date.parse(deprecation.sunset) / 1000,
        );
      }
    },
  });
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;

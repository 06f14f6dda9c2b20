import { STATUS_CODES } from 'node:http';
import type { Registry } from 'prom-client';
import { UNMATCHED_ROUTE } from '../public-api';
import { WEBHOOK_EVENT_TYPES } from '../config';
import { tallyOf } from './metric-tally';

/**
 * The closed label sets of CONTRACT §6: every label of every metric takes its values from a set
 * fixed by the code or the config in force, and anything else is counted as OTHER. A series costs
 * memory on every instance and in Prometheus for as long as the process runs, so a value a client
 * can choose (a method token over HTTP/2, a path, a header, a key's plan) must never become one:
 * 5,000 distinct HTTP/2 methods once made 90,000 series (issue 42).
 */

/** What a value outside its label's set is counted as. */
export const OTHER = 'other';

/**
 * The methods counted under their own name: those HTTP defines for resources (RFC 9110 §9, with
 * PATCH), CONNECT and TRACE aside. Routes serve a subset; the rest are answered 405 and counted
 * here, so that a 405 storm shows which method. Every other token is OTHER.
 */
export const METHOD_LABELS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** The method label of a request Node's parser refused (src/shared/http/unparsable-request.ts): no method was read. */
export const UNPARSED_METHOD = 'unparsed';

/** Status codes: 0 for a request cut off before any answer, and the codes HTTP registers (node:http's table). */
const STATUS_CODE_LABELS = ['0', ...Object.keys(STATUS_CODES)];

/** Why a request, an admin token, a forward or the key store failed: the union of every metric's `reason`. */
const REASON_LABELS = [
  // gateway_auth_failures_total
  'missing',
  'invalid',
  'revoked',
  'expired',
  // gateway_access_denied_total (src/gateway/steps/check-access.ts)
  'operation',
  'address',
  // gateway_admin_auth_failures_total
  'locked_out',
  // gateway_upstream_errors_total (src/gateway/upstream: upstream-failure and the guard)
  'timeout',
  'refused',
  'reset',
  'invalid_response',
  'overloaded',
  'circuit_open',
  'other',
  // gateway_store_data_loss_total, gateway_store_data_at_risk
  'marker_missing',
  'records_missing',
  'persistence_off',
  'evicting_policy',
  'unknown',
];

/** SQLite's result codes (sqlite.org/rescode.html), primary and extended: what `code` of the SQLite error counters takes. */
const SQLITE_CODE_LABELS = [
  ...[
    'ABORT',
    'AUTH',
    'BUSY',
    'CANTOPEN',
    'CONSTRAINT',
    'CORRUPT',
    'DONE',
    'EMPTY',
    'ERROR',
    'FORMAT',
    'FULL',
    'INTERNAL',
    'INTERRUPT',
  ],
  ...[
    'IOERR',
    'LOCKED',
    'MISMATCH',
    'MISUSE',
    'NOLFS',
    'NOMEM',
    'NOTADB',
    'NOTFOUND',
    'NOTICE',
    'OK',
    'PERM',
    'PROTOCOL',
    'RANGE',
  ],
  ...[
    'READONLY',
    'ROW',
    'SCHEMA',
    'TOOBIG',
    'WARNING',
    'ABORT_ROLLBACK',
    'AUTH_USER',
    'BUSY_RECOVERY',
    'BUSY_SNAPSHOT',
    'BUSY_TIMEOUT',
  ],
  ...[
    'CANTOPEN_CONVPATH',
    'CANTOPEN_DIRTYWAL',
    'CANTOPEN_FULLPATH',
    'CANTOPEN_ISDIR',
    'CANTOPEN_NOTEMPDIR',
    'CANTOPEN_SYMLINK',
  ],
  ...[
    'CONSTRAINT_CHECK',
    'CONSTRAINT_COMMITHOOK',
    'CONSTRAINT_DATATYPE',
    'CONSTRAINT_FOREIGNKEY',
    'CONSTRAINT_FUNCTION',
    'CONSTRAINT_NOTNULL',
  ],
  ...[
    'CONSTRAINT_PINNED',
    'CONSTRAINT_PRIMARYKEY',
    'CONSTRAINT_ROWID',
    'CONSTRAINT_TRIGGER',
    'CONSTRAINT_UNIQUE',
    'CONSTRAINT_VTAB',
  ],
  ...[
    'CORRUPT_INDEX',
    'CORRUPT_SEQUENCE',
    'CORRUPT_VTAB',
    'ERROR_MISSING_COLLSEQ',
    'ERROR_RETRY',
    'ERROR_SNAPSHOT',
    'IOERR_ACCESS',
  ],
  ...[
    'IOERR_AUTH',
    'IOERR_BEGIN_ATOMIC',
    'IOERR_BLOCKED',
    'IOERR_CHECKRESERVEDLOCK',
    'IOERR_CLOSE',
    'IOERR_COMMIT_ATOMIC',
    'IOERR_CONVPATH',
  ],
  ...[
    'IOERR_CORRUPTFS',
    'IOERR_DATA',
    'IOERR_DELETE',
    'IOERR_DELETE_NOENT',
    'IOERR_DIR_CLOSE',
    'IOERR_DIR_FSYNC',
    'IOERR_FSTAT',
    'IOERR_FSYNC',
  ],
  ...[
    'IOERR_GETTEMPPATH',
    'IOERR_IN_PAGE',
    'IOERR_LOCK',
    'IOERR_MMAP',
    'IOERR_NOMEM',
    'IOERR_RDLOCK',
    'IOERR_READ',
    'IOERR_ROLLBACK_ATOMIC',
  ],
  ...[
    'IOERR_SEEK',
    'IOERR_SHMLOCK',
    'IOERR_SHMMAP',
    'IOERR_SHMOPEN',
    'IOERR_SHMSIZE',
    'IOERR_SHORT_READ',
    'IOERR_TRUNCATE',
    'IOERR_UNLOCK',
  ],
  ...[
    'IOERR_VNODE',
    'IOERR_WRITE',
    'LOCKED_SHAREDCACHE',
    'LOCKED_VTAB',
    'NOTICE_RECOVER_ROLLBACK',
    'NOTICE_RECOVER_WAL',
    'OK_LOAD_PERMANENTLY',
  ],
  ...[
    'READONLY_CANTINIT',
    'READONLY_CANTLOCK',
    'READONLY_DBMOVED',
    'READONLY_DIRECTORY',
    'READONLY_RECOVERY',
    'READONLY_ROLLBACK',
    'WARNING_AUTOINDEX',
  ],
].map((code) => `SQLITE_${code}`);

/** A label's rule: the set of its values, or a test for values of a fixed shape (a config hash). */
type LabelRule = ReadonlySet<string> | ((value: string) => boolean);

/**
 * The sets every label name takes, fixed by the code. A label name shared by several metrics
 * (`reason`, `route`, `code`) takes the union, still closed. `plan` and `route` grow with the config
 * in force (LabelAllowlist asks it); `hash` is the config's sha256, one series at a time.
 */
const FIXED_RULES: Record<string, readonly string[] | ((value: string) => boolean)> = {
  method: [...METHOD_LABELS, UNPARSED_METHOD],
  route: [UNMATCHED_ROUTE],
  status_code: STATUS_CODE_LABELS,
  plan: ['anonymous'],
  window: ['minute', 'day', 'month', 'ban', 'anonymous'],
  reason: REASON_LABELS,
  // gateway_config_reloads_total; gateway_webhook_deliveries_total adds expired and dropped (src/notifications/notification-metrics.ts).
  result: ['success', 'failure', 'expired', 'dropped'],
  event: WEBHOOK_EVENT_TYPES,
  upstream: ['inventory'],
  to: ['closed', 'half_open', 'open'],
  database: ['keys', 'audit', 'key-usage', 'months', 'webhook-outbox', 'consumers', 'inventory'],
  statement: ['insert_pet', 'get_pet', 'list_pets', 'list_pets_by_status', 'ping', 'write_probe'],
  code: SQLITE_CODE_LABELS,
  hash: (value) => /^[0-9a-f]{64}$/.test(value),
  // gateway_lease_units_total and gateway_lease_admissions_total (src/limits/leases/).
  outcome: ['taken', 'used', 'returned', 'expired'],
  decided_by: ['lease', 'store'],
};

/** Metrics of the runtime itself (prom-client's default metrics): labelled by what the process holds, never by a client. */
const RUNTIME_METRIC = /^(process_|nodejs_)/;

type Labels = Record<string, string | number>;

/** Values a config adds to the fixed sets, by label name (the plans, the routes its deprecations name). */
export type LabelSets = Readonly<Record<string, Iterable<string>>>;

/** The rules for one answer of the config: the fixed rules, with the config's values added to their sets. */
function rulesWith(extra: LabelSets): Map<string, LabelRule> {
  const rules = new Map<string, LabelRule>();
  for (const [label, rule] of Object.entries(FIXED_RULES)) {
    rules.set(label, typeof rule === 'function' ? rule : new Set([...rule, ...(extra[label] ?? [])]));
  }
  for (const [label, values] of Object.entries(extra)) if (!rules.has(label)) rules.set(label, new Set(values));
  return rules;
}

/**
 * The closed set of each label name, and how a value outside it is counted. What a config adds
 * (`plan`, `route`) is asked of the config in force at each use, as every reader of a reloadable
 * setting asks it (src/product/reload/config-state.ts): a reload needs no call here. Series
 * already made for a value a reload removed stay; new ones for it are OTHER.
 */
export class LabelAllowlist {
  private readonly configured: () => LabelSets;
  private rules = new Map<string, LabelRule>();
  private madeFrom: LabelSets | null = null;

  /**
   * `extra`: fixed values (the inventory's routes), or a function asked at each use for the values
   * of the config in force; the sets are made again only when it answers another object.
   */
  constructor(extra: LabelSets | (() => LabelSets) = {}) {
    this.configured = typeof extra === 'function' ? extra : () => extra;
  }

  /** An allowlist whose added values are `labelSetsOf` the config `inForce()` answers, made again only when that config changes. */
  static following<C>(inForce: () => C, labelSetsOf: (config: C) => LabelSets): LabelAllowlist {
    let madeFor: { config: C; sets: LabelSets } | null = null;
    return new LabelAllowlist(() => {
      const config = inForce();
      if (madeFor === null || madeFor.config !== config) madeFor = { config, sets: labelSetsOf(config) };
      return madeFor.sets;
    });
  }

  /** The rules of the config in force: one identity check per use, new sets only after a reload. */
  private rulesInForce(): Map<string, LabelRule> {
    const sets = this.configured();
    if (sets !== this.madeFrom) {
      this.rules = rulesWith(sets);
      this.madeFrom = sets;
    }
    return this.rules;
  }

  /** The sets in force: another object after a reload changed them (metric-tally.ts indexes by it). */
  generation(): unknown {
    return this.rulesInForce();
  }

  knows(label: string): boolean {
    return this.rulesInForce().has(label);
  }

  /** `value` if `label`'s set holds it, else OTHER. */
  value(label: string, value: string | number): string {
    return valueWithin(this.rulesInForce(), label, value);
  }

  /** The labels as they may be recorded: the same object when every value is in its set (the common case allocates nothing). */
  close<T extends Labels>(labels: T): T {
    const rules = this.rulesInForce();
    let closed: Labels | null = null;
    for (const label in labels) {
      const value = labels[label]!;
      const allowed = valueWithin(rules, label, value);
      if (allowed === String(value)) continue;
      closed ??= { ...labels };
      closed[label] = allowed;
    }
    return (closed ?? labels) as T;
  }
}

function valueWithin(rules: ReadonlyMap<string, LabelRule>, label: string, value: string | number): string {
  const text = String(value);
  const rule = rules.get(label);
  if (rule === undefined) return OTHER;
  return (typeof rule === 'function' ? rule(text) : rule.has(text)) ? text : OTHER;
}

/** What prom-client's metrics take labels through (the rest reads or removes series, and makes none). */
const LABEL_TAKING_METHODS = ['inc', 'dec', 'set', 'setToCurrentTime', 'observe', 'startTimer'] as const;

type AnyMetric = { name: string; labelNames?: readonly string[] } & Record<string, unknown>;

const closedMetrics = new WeakSet<object>();

/**
 * Puts `allowlist` in front of every metric of `registry` but the runtime's own: whatever a caller
 * passes, a series is made only for values in each label's set. Done once the metrics are
 * registered (startProduct, the inventory, the supervisor), so that no metric can be added with a
 * label the allowlist does not know: that throws at start, naming it.
 *
 * prom-client has no hook for this, so each metric's label-taking methods are wrapped in place;
 * `labels(...)` is wrapped too, as histograms bind it to an inner function.
 */
export function enforceLabelAllowlist(registry: Registry, allowlist: LabelAllowlist): void {
  for (const metric of registry.getMetricsAsArray() as unknown as AnyMetric[]) {
    if (RUNTIME_METRIC.test(metric.name) || closedMetrics.has(metric)) continue;
    const labelNames = metric.labelNames ?? [];
    const unknown = labelNames.filter((label) => !allowlist.knows(label));
    if (unknown.length > 0)
      throw new Error(
        `metric ${metric.name} has labels with no closed set (src/shared/metrics/metric-labels.ts): ${unknown.join(', ')}`,
      );
    if (labelNames.length === 0) continue;
    closedMetrics.add(metric);
    // A request-path tally closes its values itself, once per new tuple (metric-tally.ts).
    tallyOf(metric)?.closeWith(allowlist);
    const closeFirst = (fn: (...args: unknown[]) => unknown) =>
      function (this: unknown, first?: unknown, ...rest: unknown[]) {
        const labels = typeof first === 'object' && first !== null ? allowlist.close(first as Labels) : first;
        return fn.call(this, labels, ...rest);
      };
    for (const name of LABEL_TAKING_METHODS) {
      if (typeof metric[name] === 'function')
        metric[name] = closeFirst(metric[name] as (...args: unknown[]) => unknown);
    }
    // zero() starts a series at 0: for a value outside the set it would wipe `other`'s counts, so it is left out.
    const zero = metric.zero as ((labels: Labels) => unknown) | undefined;
    if (zero) {
      metric.zero = function (this: unknown, given: Labels) {
        if (allowlist.close(given) === given) return zero.call(this, given);
      };
    }
    const labels = metric.labels as ((...args: unknown[]) => unknown) | undefined;
    if (labels) {
      metric.labels = function (this: unknown, ...args: unknown[]) {
        const given =
          typeof args[0] === 'object' && args[0] !== null
            ? (args[0] as Labels)
            : Object.fromEntries(labelNames.map((label, i) => [label, args[i] as string]));
        return labels.call(this, allowlist.close(given));
      };
    }
  }
}

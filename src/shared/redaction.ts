/**
 * What never reaches a log line or a span: credentials by field name, and anything shaped like one
 * of our API keys wherever it turns up. Imports nothing, so the logger, telemetry and the
 * inventory can all use it without depending on each other.
 */

/**
 * Paths pino blanks before a line is written. Keys travel only in Authorization; the censor also
 * covers any field a future change might name after a key or token.
 */
export const redactPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-gateway-token"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'authorization',
  'key',
  'apiKey',
  'token',
  'adminToken',
  '*.key',
  '*.apiKey',
  '*.token',
];

/** The product's own key family: `asg_live_…`, `asg_test_…`, `asg_dev_…`. */
export const DEFAULT_KEY_PREFIX = 'asg_dev_';

export interface KeyScrubber {
  /** Key-shaped text replaced in one string. */
  scrubString(value: string): string;
  /** The value as it is unless something below it holds key-shaped text; then a copy with it replaced. */
  scrubKeys(value: unknown): unknown;
  /**
   * For a line of primitives (the request line): as it is when no field is named like a credential,
   * holds an object or key-shaped text; else a copy with those fields blanked. It does the work of
   * redactPaths and scrubKeys for such a line in one pass over its fields, without their walk.
   */
  scrubFlat(line: Record<string, unknown>): Record<string, unknown>;
}

/** Top-level field names a flat line may never carry as they are (redactPaths' own names, and where they lead). */
const CREDENTIAL_FIELDS = new Set([
  'authorization',
  'key',
  'apiKey',
  'token',
  'adminToken',
  'req',
  'res',
  'headers',
  'cookie',
]);
const REDACTED = '[redacted]';

/**
 * A scrubber for keys of `keyPrefix`'s family (config `keys.prefix`, `<family>_<environment>_`):
 * every environment of the family is caught (a staging key pasted into a production log line too),
 * and the product's own `asg_` family always.
 */
export function createKeyScrubber(keyPrefix: string = DEFAULT_KEY_PREFIX): KeyScrubber {
  const families = [...new Set(['asg', keyPrefix.split('_')[0]!])];
  const markers = families.map((family) => `${family}_`);
  const lookalike = new RegExp(`(?:${families.join('|')})_[a-z]+_[A-Za-z0-9]{8,}`, 'g');
  const hasLookalike = new RegExp(lookalike.source);
  const mayHoldKey = (value: string) => markers.some((marker) => value.includes(marker));

  const scrubString = (value: string): string =>
    mayHoldKey(value) ? value.replace(lookalike, '[redacted-key]') : value;

  /** Whether anything below `value` holds key-shaped text; a walk that allocates nothing. */
  const holdsKey = (value: unknown, depth: number): boolean => {
    if (typeof value === 'string') return mayHoldKey(value) && hasLookalike.test(value);
    if (depth > 4 || value === null || typeof value !== 'object' || isError(value)) return false;
    const record = value as Record<string, unknown>;
    for (const k in record) if (holdsKey(record[k], depth + 1)) return true;
    return false;
  };

  const scrub = (value: unknown, depth: number): unknown => {
    if (!holdsKey(value, depth)) return value;
    if (typeof value === 'string') return scrubString(value);
    if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1));
    const scrubbed: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as object)) scrubbed[k] = scrub(v, depth + 1);
    return scrubbed;
  };

  /** Whether a flat line can be written as it is: the common case, one pass and no allocation. */
  const flatIsClean = (line: Record<string, unknown>): boolean => {
    for (const name in line) {
      const value = line[name];
      if (CREDENTIAL_FIELDS.has(name) || (value !== null && typeof value === 'object')) return false;
      if (typeof value === 'string' && mayHoldKey(value) && hasLookalike.test(value)) return false;
    }
    return true;
  };

  const scrubFlat = (line: Record<string, unknown>): Record<string, unknown> => {
    if (flatIsClean(line)) return line;
    const scrubbed: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(line)) {
      // A flat line has no objects: one that turns up is blanked whole rather than walked.
      scrubbed[name] =
        CREDENTIAL_FIELDS.has(name) || (value !== null && typeof value === 'object') ? REDACTED : scrub(value, 1);
    }
    return scrubbed;
  };

  return { scrubString, scrubKeys: (value) => scrub(value, 0), scrubFlat };
}

/** Errors go to pino's serializer whole (also errors from another realm, which fail instanceof). */
function isError(value: object): boolean {
  return value instanceof Error || Object.prototype.toString.call(value) === '[object Error]';
}

/**
 * A URL as a log line or GET /admin/config may show it, for URLs that carry their credential in
 * themselves (webhook receivers: Slack's `/services/T0…/B0…/…`, `?token=…`): a password replaced,
 * the path replaced whole when it is more than `/`, each query value (and a parameter without a
 * value) replaced, the fragment replaced. Scheme, user, host, port and the query's names stay, so
 * the operator still sees which service and which parameters. Text that is no URL is replaced whole.
 */
export function redactedUrl(value: string): string {
  if (!URL.canParse(value)) return REDACTED;
  const url = new URL(value);
  const userInfo =
    url.username === '' && url.password === '' ? '' : `${url.username}${url.password === '' ? '' : `:${REDACTED}`}@`;
  const path = url.pathname === '/' || url.pathname === '' ? url.pathname : `/${REDACTED}`;
  const parameters = url.search
    .slice(1)
    .split('&')
    .map((part) => {
      const equals = part.indexOf('=');
      if (part === '') return part;
      return equals === -1 ? REDACTED : `${part.slice(0, equals)}=${REDACTED}`;
    });
  const query = url.search === '' ? '' : `?${parameters.join('&')}`;
  const fragment = url.hash === '' ? '' : `#${REDACTED}`;
  return `${url.protocol}//${userInfo}${url.host}${path}${query}${fragment}`;
}

import net from 'node:net';

/**
 * A small HTTP/1.1 client over a raw loopback socket, for inputs an ordinary client would refuse or
 * normalise away: request targets with `..` or `%2e`, `//`, control characters and non-UTF-8 bytes in
 * header values, repeated headers, bodies whose framing lies. It writes exactly the bytes it is
 * given and reads until the first complete answer, the server closing the connection, or a
 * deadline, so it also tells whether the server answered at all, closed without answering, or hung.
 *
 * The second half of this file is the oracle both bad-input suites share: contractProblems().
 */

export type HeaderList = ReadonlyArray<readonly [string, string | Buffer]>;

export interface RawRequestSpec {
  method: string;
  /** The request target exactly as it goes on the wire. */
  target: string | Buffer;
  /** Header lines in order; repeated names stay repeated. `Host` and `Connection: close` are added unless given. */
  headers?: HeaderList;
  /** Body bytes, sent as they are: the caller declares (or does not declare) their length. */
  body?: string | Buffer;
  version?: string;
}

export interface RawResponse {
  status: number;
  statusText: string;
  /** Lower-cased header names, every value of each. */
  headers: Record<string, string[]>;
  body: Buffer;
  /** Every byte the server sent, 1xx interim answers included. */
  raw: Buffer;
}

export interface RawExchange {
  /** The final answer, or null when the server sent no parseable answer before closing or the deadline. */
  response: RawResponse | null;
  /** The server closed (or reset) the connection before a complete answer, or right after an unframed one. */
  closed: boolean;
  /** Neither an answer nor a close came before the deadline: a hang. */
  timedOut: boolean;
  /** Socket error seen while writing or reading (EPIPE, ECONNRESET), if any. */
  socketError: string | null;
}

export interface RawSendOptions {
  /** Deadline for the whole exchange (not a performance bound: a hang detector). */
  timeoutMs?: number;
  /** Further bytes written after the request, one piece at a time as the socket drains (a body sent in parts). */
  more?: Buffer[];
  /** Half-closes the connection once everything is written (the client says it will send no more). */
  endAfterWrite?: boolean;
}

/** The bytes of one request. */
export function buildRequest(spec: RawRequestSpec, authority: string): Buffer {
  const headers = [...(spec.headers ?? [])];
  const has = (name: string) => headers.some(([n]) => n.toLowerCase() === name);
  if (!has('host')) headers.unshift(['Host', authority]);
  if (!has('connection')) headers.push(['Connection', 'close']);
  const lines: Buffer[] = [
    Buffer.from(`${spec.method} `, 'latin1'),
    typeof spec.target === 'string' ? Buffer.from(spec.target, 'latin1') : spec.target,
    Buffer.from(` ${spec.version ?? 'HTTP/1.1'}\r\n`, 'latin1'),
  ];
  for (const [name, value] of headers) {
    lines.push(
      Buffer.from(`${name}: `, 'latin1'),
      typeof value === 'string' ? Buffer.from(value, 'latin1') : value,
      Buffer.from('\r\n'),
    );
  }
  lines.push(Buffer.from('\r\n'));
  if (spec.body !== undefined) lines.push(typeof spec.body === 'string' ? Buffer.from(spec.body, 'utf8') : spec.body);
  return Buffer.concat(lines);
}

/** `5\r\nhello\r\n…0\r\n\r\n` for the given pieces. */
export function chunkedBody(pieces: ReadonlyArray<string | Buffer>): Buffer {
  const out: Buffer[] = [];
  for (const piece of pieces) {
    const bytes = typeof piece === 'string' ? Buffer.from(piece, 'utf8') : piece;
    if (bytes.length === 0) continue;
    out.push(Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n'));
  }
  out.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(out);
}

/**
 * Parses the first final (non-1xx) answer in `raw`; null while there is none or it is incomplete.
 * `closed`: the server has closed, so an answer without framing ends here. `bodiless`: the answer
 * to a HEAD request, which has no body whatever its headers say.
 */
export function parseResponse(
  raw: Buffer,
  { closed = true, bodiless = false }: { closed?: boolean; bodiless?: boolean } = {},
): RawResponse | null {
  return parseResponseAt(raw, 0, closed, bodiless)?.response ?? null;
}

/** Every complete final answer in `raw`, in order (pipelined requests get one each). */
export function parseResponses(raw: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let offset = 0;
  for (;;) {
    const parsed = parseResponseAt(raw, offset, true, false);
    if (!parsed) return responses;
    responses.push(parsed.response);
    if (parsed.end >= raw.length) return responses;
    offset = parsed.end;
  }
}

function parseResponseAt(
  raw: Buffer,
  start: number,
  closed: boolean,
  bodiless: boolean,
): { response: RawResponse; end: number } | null {
  let offset = start;
  for (;;) {
    const headEnd = raw.indexOf('\r\n\r\n', offset);
    if (headEnd === -1) return null;
    const head = raw.subarray(offset, headEnd).toString('latin1').split('\r\n');
    const statusLine = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(head[0] ?? '');
    if (!statusLine) return null;
    const status = Number(statusLine[1]);
    const headers: Record<string, string[]> = {};
    for (const line of head.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      (headers[name] ??= []).push(line.slice(colon + 1).trim());
    }
    const bodyStart = headEnd + 4;
    if (status >= 100 && status < 200) {
      offset = bodyStart;
      continue;
    }
    const rest = raw.subarray(bodyStart);
    let framed: { body: Buffer; length: number } | null;
    if (bodiless || status === 204 || status === 304) {
      framed = { body: Buffer.alloc(0), length: 0 };
    } else if ((headers['transfer-encoding'] ?? []).some((v) => /chunked/i.test(v))) {
      framed = decodeChunked(rest);
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length'][0]);
      framed = rest.length >= length ? { body: rest.subarray(0, length), length } : null;
    } else {
      framed = closed ? { body: rest, length: rest.length } : null;
    }
    if (framed === null) return null;
    return {
      response: { status, statusText: statusLine[2] ?? '', headers, body: framed.body, raw },
      end: bodyStart + framed.length,
    };
  }
}

/** The body of a chunked answer and how many bytes its framing took; null while incomplete. */
function decodeChunked(data: Buffer): { body: Buffer; length: number } | null {
  const out: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', offset);
    if (lineEnd === -1) return null;
    const size = parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) return null;
    offset = lineEnd + 2;
    if (size === 0) {
      const trailerEnd = data.indexOf('\r\n', offset);
      if (trailerEnd === -1) return null;
      return { body: Buffer.concat(out), length: trailerEnd + 2 };
    }
    if (data.length < offset + size) return null;
    out.push(data.subarray(offset, offset + size));
    offset += size + 2;
  }
}

/**
 * Sends one request's bytes to `baseUrl` (http://127.0.0.1:port) and collects the answer: the
 * exchange ends with the first complete final answer, when the server closes the connection, or at
 * the deadline. Never rejects: what happened is in the result.
 */
export function sendRaw(
  baseUrl: string,
  request: RawRequestSpec | Buffer,
  options: RawSendOptions = {},
): Promise<RawExchange> {
  const url = new URL(baseUrl);
  const bytes = Buffer.isBuffer(request) ? request : buildRequest(request, url.host);
  const pieces = [bytes, ...(options.more ?? [])];
  const timeoutMs = options.timeoutMs ?? 10_000;
  const bodiless = bytes.subarray(0, 5).toString('latin1') === 'HEAD ';
  return new Promise((resolve) => {
    const received: Buffer[] = [];
    let socketError: string | null = null;
    let settled = false;
    const socket = net.connect(Number(url.port), url.hostname);
    const finish = (closed: boolean, timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      const response = parseResponse(Buffer.concat(received), { closed, bodiless });
      resolve({ response, closed, timedOut, socketError });
    };
    const deadline = setTimeout(() => finish(false, true), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received.push(chunk);
      // A complete answer ends the exchange even on a connection the server keeps open.
      if (parseResponse(Buffer.concat(received), { closed: false, bodiless })) finish(false, false);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      socketError ??= err.code ?? err.message;
    });
    socket.on('close', () => finish(true, false));
    socket.once('connect', () => void writePieces(socket, pieces, options.endAfterWrite ?? false));
  });
}

/**
 * Writes `bytes` (several requests back to back, say) on one connection and collects every answer
 * until the server closes it or the deadline passes. The last request should ask to close.
 */
export function sendRawPipeline(
  baseUrl: string,
  bytes: Buffer,
  timeoutMs = 10_000,
): Promise<{ responses: RawResponse[]; closed: boolean }> {
  const url = new URL(baseUrl);
  return new Promise((resolve) => {
    const received: Buffer[] = [];
    let settled = false;
    const socket = net.connect(Number(url.port), url.hostname, () => socket.write(bytes));
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      resolve({ responses: parseResponses(Buffer.concat(received)), closed });
    };
    const deadline = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => finish(true));
  });
}

/** Writes each piece in turn, waiting for the socket to drain; stops quietly if the server closes. */
async function writePieces(socket: net.Socket, pieces: Buffer[], endAfterWrite: boolean): Promise<void> {
  for (const piece of pieces) {
    if (socket.destroyed) return;
    if (socket.write(piece)) continue;
    await new Promise<void>((resolve) => {
      const go = () => {
        socket.off('drain', go);
        socket.off('close', go);
        resolve();
      };
      socket.on('drain', go);
      socket.on('close', go);
    });
  }
  if (endAfterWrite && !socket.destroyed) socket.end();
}

/*
 * What every answer to a bad input must be. Shared by the catalogue and the property tests, so
 * both hold the gateway to one reading of the contract.
 */

/** CONTRACT §3's error codes by status, restated here as the tests' oracle (not imported from src). */
export const CONTRACT_CODES: Readonly<Record<number, readonly string[]>> = {
  400: ['invalid_json', 'validation_failed', 'invalid_parameter', 'malformed_request'],
  401: ['missing_api_key', 'invalid_api_key', 'revoked_api_key'],
  404: ['not_found'],
  405: ['method_not_allowed'],
  410: ['gone'],
  413: ['payload_too_large'],
  415: ['unsupported_media_type'],
  431: ['headers_too_large'],
  429: ['rate_limited', 'temporarily_banned'],
  500: ['internal_error'],
  502: ['upstream_unavailable', 'service_unavailable', 'upstream_timeout'],
  503: ['upstream_unavailable', 'service_unavailable', 'upstream_timeout'],
  504: ['upstream_unavailable', 'service_unavailable', 'upstream_timeout'],
};

export const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * What a body must never show: stack frames, source paths, error class names, and the inventory's
 * refusal of a request without the gateway's token (a client seeing it means the gateway's own
 * token went missing on the way).
 */
const LEAK_PATTERNS: readonly RegExp[] = [
  /x-gateway-token/i,
  /signed by the gateway/i,
  /\n\s*at \S/,
  /\bat [\w.<>]+ \(/,
  /node_modules/,
  /\.(?:ts|js):\d+/,
  /\b(?:TypeError|RangeError|ReferenceError|SyntaxError|AssertionError)\b/,
  /\/(?:work|home|tmp|usr|src)\//,
];

export type Outcome =
  /** Our code answered (it sets X-Request-Id on every answer). */
  | { kind: 'gateway'; status: number; code: string | null }
  /** node:http answered by itself, before any of our code ran. */
  | { kind: 'node'; status: number }
  /** The server closed the connection without answering. */
  | { kind: 'closed' }
  /** No answer and no close before the deadline. */
  | { kind: 'hang' };

export function outcomeOf(exchange: RawExchange): Outcome {
  const res = exchange.response;
  if (!res) return exchange.timedOut ? { kind: 'hang' } : { kind: 'closed' };
  if (res.headers['x-request-id'] === undefined) return { kind: 'node', status: res.status };
  return { kind: 'gateway', status: res.status, code: errorCodeOf(res) };
}

function errorCodeOf(res: RawResponse): string | null {
  try {
    const body = JSON.parse(res.body.toString('utf8')) as { code?: unknown };
    return typeof body?.code === 'string' ? body.code : null;
  } catch {
    return null;
  }
}

export function describeOutcome(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'gateway':
      return outcome.code ? `${outcome.status} ${outcome.code}` : String(outcome.status);
    case 'node':
      return `node's own ${outcome.status}`;
    case 'closed':
      return 'closed without an answer';
    case 'hang':
      return 'no answer (hang)';
  }
}

export interface ContractCheckOptions {
  /** The request was HEAD: an error answer has the Error headers but no body. */
  head?: boolean;
  /** Text that must not appear in any body (the data directory, the working directory). */
  forbidden?: readonly string[];
  /** Closing without an answer is acceptable for this input (CONNECT, a client that half-closes). */
  mayCloseWithoutAnswer?: boolean;
}

/**
 * Everything wrong with one exchange, as readable lines; empty when it meets the contract:
 * an answer (no hang), never 5xx, X-Request-Id on everything our code answers, the Error body with
 * a code of CONTRACT §3 matching the status on every 4xx, nothing internal in any body. An answer
 * without X-Request-Id is acceptable only as node:http's own bodiless refusal.
 */
export function contractProblems(exchange: RawExchange, options: ContractCheckOptions = {}): string[] {
  const problems: string[] = [];
  const res = exchange.response;
  if (!res) {
    if (exchange.timedOut) problems.push('no answer and no close before the deadline (hang)');
    else if (!options.mayCloseWithoutAnswer)
      problems.push(`closed without an answer (socket error: ${exchange.socketError ?? 'none'})`);
    return problems;
  }
  const bodyText = res.body.toString('utf8');
  if (res.status >= 500) problems.push(`answered ${res.status}: ${bodyText.slice(0, 200)}`);
  for (const pattern of LEAK_PATTERNS)
    if (pattern.test(bodyText)) problems.push(`body matches ${pattern}: ${bodyText.slice(0, 200)}`);
  for (const text of options.forbidden ?? [])
    if (text && bodyText.includes(text)) problems.push(`body contains ${JSON.stringify(text)}`);

  const requestId = res.headers['x-request-id'];
  if (requestId === undefined) {
    // Every answer is ours now, node's parser refusals and unknown expectations included.
    problems.push(`answer without X-Request-Id: ${res.status} ${bodyText.slice(0, 200)}`);
    return problems;
  }
  if (requestId.length !== 1 || !SANE_REQUEST_ID.test(requestId[0]!))
    problems.push(`X-Request-Id is not one sane value: ${JSON.stringify(requestId)}`);
  if (res.status < 400) return problems;

  const contentType = res.headers['content-type']?.[0] ?? '';
  if (!/^application\/json\b/.test(contentType))
    problems.push(`${res.status} with content type ${JSON.stringify(contentType)}, not application/json`);
  if (res.status === 405 && !res.headers['allow']?.[0]) problems.push('405 without Allow');
  if (res.status === 429 && !/^[1-9]\d*$/.test(res.headers['retry-after']?.[0] ?? ''))
    problems.push('429 without a Retry-After of whole seconds ≥ 1');
  if (options.head) return problems;
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch {
    problems.push(`${res.status} body is not JSON: ${JSON.stringify(bodyText.slice(0, 200))}`);
    return problems;
  }
  const error = body as { code?: unknown; message?: unknown; status?: unknown } | null;
  const keys = error && typeof error === 'object' ? Object.keys(error).sort().join(',') : typeof error;
  // A 429 rate_limited names the window that refused it (CONTRACT §3): the one field an Error body adds.
  const expected =
    (error as { code?: unknown } | null)?.code === 'rate_limited'
      ? 'code,message,status,window'
      : 'code,message,status';
  if (keys !== expected) problems.push(`Error body has fields ${keys}, not ${expected}`);
  if (error?.status !== res.status)
    problems.push(`Error body status ${String(error?.status)} differs from HTTP ${res.status}`);
  if (typeof error?.message !== 'string' || error.message.length === 0) problems.push('Error body without a message');
  const codes = CONTRACT_CODES[res.status];
  if (!codes) problems.push(`status ${res.status} is not one the contract names`);
  else if (!codes.includes(String(error?.code)))
    problems.push(`code ${String(error?.code)} is not one of ${codes.join(', ')} for ${res.status}`);
  return problems;
}

/**
 * Log lines at error level that a bad input could have caused: everything at level ≥ 50 except the
 * store's own availability messages ("store unreachable", "store unavailable"), which a loaded
 * machine can produce (a Redis command timing out) whatever the input.
 */
export function inputErrorLogLines(lines: readonly string[]): string[] {
  return lines.filter((line) => {
    try {
      const entry = JSON.parse(line) as { level?: number; msg?: string };
      return (entry.level ?? 0) >= 50 && !/^store /.test(entry.msg ?? '');
    } catch {
      return false;
    }
  });
}

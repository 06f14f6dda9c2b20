/** An admin API answer that was not a success, with the Error body's message. */
export class AdminRequestError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    readonly code: string | null,
    /** The Error body as sent (a refused reload lists each bad setting in `errors`). */
    readonly body: unknown = null,
  ) {
    super(message);
    this.name = 'AdminRequestError';
  }
}

/** A usage export of many keys and days streams for minutes, not seconds. */
const EXPORT_TIMEOUT_MS = 30 * 60_000;

/**
 * The admin API over HTTP, as the CLI uses it; built with an API key for the gateway instead, it
 * asks only `ownUsage` (a client's own view, `GET /v1/usage`).
 */
export class AdminClient {
  private readonly baseUrl: URL;

  constructor(
    baseUrl: string,
    private readonly token: string,
    private readonly target: { variable: string; name: string } = { variable: 'ADMIN_URL', name: 'the admin API' },
  ) {
    try {
      this.baseUrl = new URL(baseUrl);
    } catch {
      throw new AdminRequestError(`${target.variable} is not a URL: ${baseUrl}`, null, null);
    }
  }

  /** Any admin call with a JSON body and answer (the consumer commands: cli/consumer-commands.ts). */
  call(method: string, path: string, body?: unknown): Promise<unknown> {
    return this.request(method, path, body);
  }

  /** The calling key's plan, windows, ban and expiry; counts nothing. */
  ownUsage() {
    return this.request('GET', '/v1/usage');
  }

  createKey(body: {
    name: string;
    plan: string;
    limits?: { perMinute: number; perDay: number };
    expiresAt?: string;
    allowedOperations?: string[] | null;
    allowedAddresses?: string[] | null;
  }) {
    return this.request('POST', '/admin/keys', body);
  }
  listKeys() {
    return this.request('GET', '/admin/keys');
  }
  getKey(id: string) {
    return this.request('GET', `/admin/keys/${encodeURIComponent(id)}`);
  }
  updateKey(id: string, patch: Record<string, unknown>) {
    return this.request('PATCH', `/admin/keys/${encodeURIComponent(id)}`, patch);
  }
  revokeKey(id: string) {
    return this.request('DELETE', `/admin/keys/${encodeURIComponent(id)}`);
  }
  liftBan(id: string) {
    return this.request('DELETE', `/admin/keys/${encodeURIComponent(id)}/ban`);
  }
  rotateKey(id: string, body: { graceSeconds?: number }) {
    return this.request('POST', `/admin/keys/${encodeURIComponent(id)}/rotate`, body);
  }
  keyUsage(id: string, days?: number) {
    return this.request(
      'GET',
      `/admin/keys/${encodeURIComponent(id)}/usage${days === undefined ? '' : `?days=${days}`}`,
    );
  }
  /** The backup of every key record, NDJSON handed to `write` chunk by chunk as it arrives (100,000 keys are some 45 MB). */
  exportKeys(write: (chunk: string) => Promise<void>): Promise<void> {
    return this.streamTo('/admin/keys/export', write);
  }
  /** Loads a backup (the export's lines, text or a file's stream, sent as it is read); {imported, unchanged}. */
  async importKeys(ndjson: string | AsyncIterable<Uint8Array>) {
    const response = await this.fetch(
      'POST',
      '/admin/keys/import',
      ndjson,
      { contentType: 'application/x-ndjson' },
      EXPORT_TIMEOUT_MS,
    );
    if (!response.ok) throw await this.refusal(response);
    return response.json();
  }
  /** One-off units for the key's current billing month; the key with its month window. */
  addCredits(id: string, units: number) {
    return this.request('POST', `/admin/keys/${encodeURIComponent(id)}/credits`, { units });
  }

  /**
   * GET /admin/usage/export, handed to `write` chunk by chunk as it arrives (a year of many keys is
   * far too much to hold). An answer other than 200 is thrown before anything is written.
   */
  async usageExport(from: string, to: string, write: (chunk: string) => Promise<void>): Promise<void> {
    const query = new URLSearchParams({ from, to });
    await this.streamTo(`/admin/usage/export?${query}`, write);
  }

  /** A GET whose answer is handed to `write` as it arrives; an answer other than 200 is thrown before anything is written. */
  private async streamTo(path: string, write: (chunk: string) => Promise<void>): Promise<void> {
    const response = await this.fetch('GET', path, undefined, {}, EXPORT_TIMEOUT_MS);
    if (!response.ok) throw await this.refusal(response);
    const decoder = new TextDecoder();
    for await (const chunk of response.body ?? []) await write(decoder.decode(chunk, { stream: true }));
    const rest = decoder.decode();
    if (rest) await write(rest);
  }

  /** POST /admin/reload: the config and TLS files read again, as SIGHUP does. */
  reload() {
    return this.request('POST', '/admin/reload');
  }
  audit(limit?: number) {
    return this.request('GET', `/admin/audit${limit === undefined ? '' : `?limit=${limit}`}`);
  }

  /** `raw`: a success is returned as text, not parsed; `contentType`: `body` is sent as that text as is. */
  private async request(
    method: string,
    path: string,
    body?: unknown,
    as: { raw?: boolean; contentType?: string } = {},
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each command reads the fields of its own route's answer
  ): Promise<any> {
    // A backup of many keys takes longer than one admin call.
    const response = await this.fetch(method, path, body, as, as.raw || as.contentType ? 120_000 : 10_000);
    if (response.status === 204) return null;
    if (!response.ok) throw await this.refusal(response);
    const text = await response.text();
    if (as.raw) return text;
    try {
      return text ? JSON.parse(text) : null;
    } catch {
      return null;
    }
  }

  private async fetch(
    method: string,
    path: string,
    body: unknown,
    as: { contentType?: string },
    timeoutMs: number,
  ): Promise<Response> {
    try {
      return await fetch(new URL(path, this.baseUrl), {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': as.contentType ?? 'application/json' }),
        },
        body: body === undefined ? undefined : as.contentType ? (body as string) : JSON.stringify(body),
        // A body given as a stream (an import read from its file) is sent as it is read.
        ...(typeof body === 'object' && body !== null && Symbol.asyncIterator in body ? { duplex: 'half' } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (err as Error).name;
      throw new AdminRequestError(`cannot reach ${this.target.name} at ${this.baseUrl.origin} (${reason})`, null, null);
    }
  }

  /** An answer other than 2xx as the error the CLI prints: the Error body's message, status and code. */
  private async refusal(response: Response): Promise<AdminRequestError> {
    const text = await response.text();
    let parsed: { message?: unknown; code?: unknown } | null = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // a non-JSON answer is reported by its status
    }
    const code = typeof parsed?.code === 'string' ? parsed.code : null;
    // One line: the API's message is the server's text, and the CLI prints it on a line of its own.
    const message =
      typeof parsed?.message === 'string' ? parsed.message.replace(/[\r\n]+/g, ' ') : `HTTP ${response.status}`;
    return new AdminRequestError(
      `${message} (${response.status}${code ? ` ${code}` : ''})`,
      response.status,
      code,
      parsed,
    );
  }
}

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

  /** The calling key's plan, windows, ban and expiry; counts nothing. */
  ownUsage() {
    return this.request('GET', '/v1/usage');
  }

  createKey(body: { name: string; plan: string; limits?: { perMinute: number; perDay: number }; expiresAt?: string }) {
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
    return this.request('GET', `/admin/keys/${encodeURIComponent(id)}/usage${days === undefined ? '' : `?days=${days}`}`);
  }
  /** The backup of every key record, NDJSON text as the admin API sent it. */
  exportKeys(): Promise<string> {
    return this.request('GET', '/admin/keys/export', undefined, { raw: true });
  }
  /** Loads a backup (the export's lines); {imported, unchanged}. */
  importKeys(ndjson: string) {
    return this.request('POST', '/admin/keys/import', ndjson, { contentType: 'application/x-ndjson' });
  }
  /** One-off units for the key's current billing month; the key with its month window. */
  addCredits(id: string, units: number) {
    return this.request('POST', `/admin/keys/${encodeURIComponent(id)}/credits`, { units });
  }

  /** POST /admin/reload: the config and TLS files read again, as SIGHUP does. */
  reload() {
    return this.request('POST', '/admin/reload');
  }
  audit(limit?: number) {
    return this.request('GET', `/admin/audit${limit === undefined ? '' : `?limit=${limit}`}`);
  }

  /** `raw`: a success is returned as text, not parsed; `contentType`: `body` is sent as that text as is. */
  private async request(method: string, path: string, body?: unknown, as: { raw?: boolean; contentType?: string } = {}): Promise<any> {
    let response: Response;
    try {
      response = await fetch(new URL(path, this.baseUrl), {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': as.contentType ?? 'application/json' }),
        },
        body: body === undefined ? undefined : as.contentType ? (body as string) : JSON.stringify(body),
        // A backup of many keys takes longer than one admin call.
        signal: AbortSignal.timeout(as.raw || as.contentType ? 120_000 : 10_000),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (err as Error).name;
      throw new AdminRequestError(`cannot reach ${this.target.name} at ${this.baseUrl.origin} (${reason})`, null, null);
    }
    if (response.status === 204) return null;
    const text = await response.text();
    if (as.raw && response.ok) return text;
    let parsed: any = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // fall through: a non-JSON answer is reported by status below
    }
    if (!response.ok) {
      const code = typeof parsed?.code === 'string' ? parsed.code : null;
      // One line: the API's message is the server's text, and the CLI prints it on a line of its own.
      const message = typeof parsed?.message === 'string' ? parsed.message.replace(/[\r\n]+/g, ' ') : `HTTP ${response.status}`;
      throw new AdminRequestError(`${message} (${response.status}${code ? ` ${code}` : ''})`, response.status, code, parsed);
    }
    return parsed;
  }
}

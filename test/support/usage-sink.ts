import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudEvent, HTTP, ValidationError } from 'cloudevents';

/** How the sink answers now: takes events (`up`), answers 500 (`error`), or drops the connection (`down`). */
export type SinkMode = 'up' | 'error' | 'down';

/**
 * A metering sink shaped like OpenMeter's ingest API (POST /api/v1/events): structured CloudEvents,
 * one (`application/cloudevents+json`) or a batch (`application/cloudevents-batch+json`), each
 * parsed and validated by the CloudEvents SDK (`cloudevents`); anything else is answered 400 and
 * kept in `rejected`. Events are de-duplicated on (source, id), as OpenMeter does; `duplicates`
 * counts those set aside, and `conflicts` those whose id came back with other data (a replay that
 * would have counted something else: never acceptable).
 */
export class UsageSink {
  mode: SinkMode = 'up';
  readonly events = new Map<string, CloudEvent<Record<string, unknown>>>();
  /** Date.now() when each kept event (by source and id) first arrived. */
  readonly firstSeenAt = new Map<string, number>();
  readonly rejected: string[] = [];
  duplicates = 0;
  conflicts = 0;
  /** Requests by how they were answered. */
  readonly answered = { accepted: 0, error: 0, dropped: 0 };
  /** The headers of the last request taken. */
  lastHeaders: http.IncomingHttpHeaders = {};
  private readonly server: http.Server;
  url = '';

  constructor() {
    this.server = http.createServer((req, res) => this.take(req, res));
  }

  private take(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.mode === 'down') {
      this.answered.dropped += 1;
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (this.mode === 'error') {
        this.answered.error += 1;
        res.writeHead(500).end();
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      let parsed: CloudEvent<Record<string, unknown>>[];
      try {
        parsed = this.parse(req, body);
      } catch (err) {
        this.rejected.push(`${(err as Error).message}: ${body.slice(0, 500)}`);
        res.writeHead(400).end();
        return;
      }
      for (const event of parsed) this.keep(event);
      this.answered.accepted += 1;
      this.lastHeaders = req.headers;
      res.writeHead(202).end();
    });
  }

  private parse(req: http.IncomingMessage, body: string): CloudEvent<Record<string, unknown>>[] {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
    if (req.method !== 'POST' || req.url !== '/api/v1/events')
      throw new Error(`not the ingest endpoint: ${req.method} ${req.url}`);
    if (type !== 'application/cloudevents-batch+json' && type !== 'application/cloudevents+json')
      throw new Error(`content-type ${type}`);
    const received = HTTP.toEvent<Record<string, unknown>>({ headers: req.headers as Record<string, string>, body });
    // Made again as CloudEvent (strict): every required attribute, a valid id, time and type, or it throws.
    return (Array.isArray(received) ? received : [received]).map((event) => {
      const strict = new CloudEvent<Record<string, unknown>>({ ...event }, true);
      if (!strict.validate()) throw new ValidationError('invalid CloudEvent');
      return strict;
    });
  }

  private keep(event: CloudEvent<Record<string, unknown>>): void {
    const name = `${event.source} ${event.id}`;
    const held = this.events.get(name);
    if (!held) {
      this.events.set(name, event);
      this.firstSeenAt.set(name, Date.now());
      return;
    }
    this.duplicates += 1;
    if (
      JSON.stringify(held.data) !== JSON.stringify(event.data) ||
      held.type !== event.type ||
      held.subject !== event.subject
    )
      this.conflicts += 1;
  }

  /** The sum of `data.<field>` over the events of `type` kept, per subject (what a SUM meter shows). */
  sumsBySubject(type: string, field = 'units'): Map<string, number> {
    const sums = new Map<string, number>();
    for (const event of this.events.values()) {
      if (event.type !== type) continue;
      sums.set(event.subject!, (sums.get(event.subject!) ?? 0) + Number(event.data![field]));
    }
    return sums;
  }

  /** The same per data.keyId and the UTC day of the event's time. */
  sumsByKeyAndDay(type: string, field = 'units'): Map<string, number> {
    const sums = new Map<string, number>();
    for (const event of this.events.values()) {
      if (event.type !== type) continue;
      const name = `${String(event.data!.keyId)} ${event.time!.slice(0, 10)}`;
      sums.set(name, (sums.get(name) ?? 0) + Number(event.data![field]));
    }
    return sums;
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/api/v1/events`;
    return this.url;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

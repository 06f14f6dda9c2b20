import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** A fresh Standard Webhooks secret: `whsec_` and the base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** One POST the receiver took, verified by the Standard Webhooks reference library. */
export interface Delivery {
  id: string;
  /** Date.now() when the request arrived. */
  receivedAt: number;
  /** The parsed body, as the library returned it after verifying the signature. */
  body: { type: string; timestamp: string; data: Record<string, unknown> };
  /** What the receiver answered (or `hang`: nothing). */
  answered: number | 'hang';
}

/** What the receiver does with the n-th request (0-based): a status, a redirect, or never answer. */
export type Behaviour = (n: number) => number | 'hang' | { redirectTo: string };

/**
 * A webhook receiver on loopback: every request is verified with `standardwebhooks` (a request that
 * fails verification is kept in `rejected` and answered 400), recorded, and answered as the
 * behaviour says (200 by default).
 */
export class WebhookReceiver {
  readonly secret: string;
  readonly deliveries: Delivery[] = [];
  readonly rejected: string[] = [];
  behaviour: Behaviour = () => 200;
  private readonly server: http.Server;
  private readonly hanging = new Set<http.ServerResponse>();
  private count = 0;
  url = '';

  constructor(secret = newWebhookSecret()) {
    this.secret = secret;
    const verifier = new Webhook(secret);
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let body: Delivery['body'];
        try {
          body = verifier.verify(raw, req.headers as Record<string, string>) as Delivery['body'];
        } catch (err) {
          this.rejected.push(`${(err as Error).message}: ${raw}`);
          res.writeHead(400).end();
          return;
        }
        const behaviour = this.behaviour(this.count++);
        const answered = typeof behaviour === 'object' ? 307 : behaviour;
        this.deliveries.push({ id: req.headers['webhook-id'] as string, receivedAt: Date.now(), body, answered });
        if (behaviour === 'hang') {
          this.hanging.add(res);
          return;
        }
        if (typeof behaviour === 'object') res.writeHead(307, { location: behaviour.redirectTo }).end();
        else res.writeHead(behaviour, { 'content-type': 'text/plain' }).end('ok');
      });
    });
  }

  async start(port = 0): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  /** The port it listens on (to start a receiver again on the same URL). */
  get port(): number {
    return Number(new URL(this.url).port);
  }

  /** Deliveries answered 2xx, each id once. */
  deliveredIds(): string[] {
    return [
      ...new Set(this.deliveries.filter((d) => typeof d.answered === 'number' && d.answered < 300).map((d) => d.id)),
    ];
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

import net from 'node:net';
import request from 'supertest';
import { parseResponse, type RawResponse } from '../reliability/raw-http';
import type { ProductHarness } from './gateway-kit';
import { logLines } from '../../support/log-lines';

/**
 * Helpers of the suites on the listeners themselves (parser refusals, timeouts): a raw connection
 * from a chosen loopback address that tells when the server answered and when it closed, the
 * product's counters as a scrape of the admin /metrics shows them, and its captured log lines.
 */

export interface RawConnection {
  socket: net.Socket;
  /** Writes bytes as they are. */
  write(bytes: string | Buffer): void;
  /** The next complete answer on this connection; rejects if none arrives within `timeoutMs`. */
  response(timeoutMs: number): Promise<RawResponse>;
  /** When the server closes (or resets) the connection, with every byte it sent that no response() took; rejects after `timeoutMs`. */
  closed(timeoutMs: number): Promise<{ at: number; bytes: string }>;
}

/**
 * A connection to `baseUrl` bound to `localAddress` (any 127.x.y.z works on loopback), so a test can
 * tell the client's own address from any other in what the server logs.
 */
export function openConnection(baseUrl: string, localAddress = '127.0.0.1'): Promise<RawConnection> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let received = Buffer.alloc(0);
    let closedAt: number | null = null;
    const waiters = new Set<() => void>();
    const wake = () => {
      for (const waiter of [...waiters]) waiter();
    };
    const socket = net.connect({ port: Number(url.port), host: url.hostname, localAddress });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      wake();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closedAt = performance.now();
      wake();
    });
    socket.once('error', reject);
    /** Not a poll: checked on each chunk the socket receives (and at close); settles once `check` gives a result (an Error rejects), or rejects at the deadline. */
    const whenReceived = <T>(timeoutMs: number, what: string, check: () => T | Error | null): Promise<T> =>
      new Promise((settle, fail) => {
        const attempt = () => {
          const result = check();
          if (result === null) return;
          waiters.delete(attempt);
          clearTimeout(deadline);
          if (result instanceof Error) fail(result);
          else settle(result);
        };
        const deadline = setTimeout(() => {
          waiters.delete(attempt);
          fail(
            new Error(
              `${what} within ${timeoutMs} ms; received so far: ${JSON.stringify(received.toString('latin1').slice(0, 300))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(attempt);
        attempt();
      });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve({
        socket,
        write: (bytes) => void socket.write(bytes),
        response: (timeoutMs) =>
          whenReceived(timeoutMs, 'no complete answer', () => {
            const res = parseResponse(received, { closed: closedAt !== null });
            if (res) received = Buffer.alloc(0);
            else if (closedAt !== null)
              return new Error(
                `closed without a complete answer: ${JSON.stringify(received.toString('latin1').slice(0, 300))}`,
              );
            return res;
          }),
        closed: (timeoutMs) =>
          whenReceived(timeoutMs, 'the server did not close the connection', () =>
            closedAt === null ? null : { at: closedAt, bytes: received.toString('latin1') },
          ),
      });
    });
  });
}

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** Every sample of `name` in one scrape of the admin /metrics. */
export async function scrape(product: ProductHarness, name: string): Promise<Sample[]> {
  const text = (await request(product.adminUrl).get('/metrics').expect(200)).text;
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[pair[1]!] = pair[2]!;
    samples.push({ labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum over samples whose labels include every one of `labels`. */
export function total(samples: readonly Sample[], labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** The product's captured log lines, parsed (the kit's reader, `test/support/log-lines.ts`). */
export function logEntries(product: ProductHarness): Array<Record<string, unknown>> {
  return logLines(product);
}

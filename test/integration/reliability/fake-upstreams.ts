import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * Misbehaving upstreams for the reliability suites, and the few readers those suites share (a
 * metric from the admin listener's /metrics, a process's resident set size from /proc).
 */

/**
 * How the faulty upstream answers a request, chosen by its `fault` query parameter
 * (`/v1/pets?fault=silent`), so that one gateway can meet every fault and a healthy answer in turn:
 * - `none` (or no parameter): 200 `[]`, keep-alive;
 * - `silent`: reads the request and never answers;
 * - `cut-mid-body`: a 200 head promising 64 KiB, 1 KiB of it, then the socket closed;
 * - `reset-before-head`: the connection reset (RST) before any byte of an answer;
 * - `garbage`: `HELLO\r\n\r\n`, which is not HTTP; the socket is left open for the gateway to close.
 */
export const FAULTS = ['none', 'silent', 'cut-mid-body', 'reset-before-head', 'garbage'] as const;
export type Fault = (typeof FAULTS)[number];

export const PROMISED_BODY_BYTES = 64 * 1024;
export const SENT_BODY_BYTES = 1024;

export interface ReceivedHead {
  target: string;
  fault: Fault;
  headers: string;
}

export interface FaultyUpstream {
  url: string;
  /** Every request head received, in order. */
  received: ReceivedHead[];
  /** Connections accepted so far. */
  acceptedSockets(): number;
  /** Connections still open (neither side has closed them yet). */
  openSockets(): number;
  /** Of those, the ones that have carried at least one request (the rest were opened and left idle). */
  openSocketsThatCarriedRequests(): number;
  close(): Promise<void>;
}

function faultOf(target: string): Fault {
  const value = new URL(target, 'http://upstream').searchParams.get('fault') ?? 'none';
  return (FAULTS as readonly string[]).includes(value) ? (value as Fault) : 'none';
}

const HEALTHY_ANSWER =
  'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-Fake-Upstream: healthy\r\n\r\n[]';
const HEALTHZ_ANSWER = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"status":"ok"}';

/**
 * A raw TCP upstream on loopback. It parses request heads itself (and skips a Content-Length body),
 * so it can answer in ways node:http never would, and it counts its connections, so a test can
 * see whether the gateway let go of them.
 */
export async function startFaultyUpstream(): Promise<FaultyUpstream> {
  const received: ReceivedHead[] = [];
  const open = new Set<net.Socket>();
  const carried = new WeakSet<net.Socket>();
  let accepted = 0;

  const server = net.createServer((socket) => {
    accepted++;
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    let bodyToSkip = 0;
    let stopped = false;

    socket.on('data', (chunk: Buffer) => {
      if (stopped) return;
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        if (bodyToSkip > 0) {
          const skipped = Math.min(bodyToSkip, buffered.length);
          buffered = buffered.subarray(skipped);
          bodyToSkip -= skipped;
          if (bodyToSkip > 0) return;
        }
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString('latin1');
        buffered = buffered.subarray(end + 4);
        const [requestLine = '', ...headerLines] = head.split('\r\n');
        const target = requestLine.split(' ')[1] ?? '/';
        const length = /^content-length:\s*(\d+)/im.exec(headerLines.join('\n'));
        bodyToSkip = length ? Number(length[1]) : 0;
        const fault = faultOf(target);
        received.push({ target, fault, headers: headerLines.join('\n') });
        carried.add(socket);
        if (target === '/healthz') {
          socket.write(HEALTHZ_ANSWER);
          continue;
        }
        switch (fault) {
          case 'none':
            socket.write(HEALTHY_ANSWER);
            continue;
          case 'silent':
            stopped = true;
            return;
          case 'cut-mid-body':
            stopped = true;
            socket.write(
              `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${PROMISED_BODY_BYTES}\r\n\r\n` +
                '['.padEnd(SENT_BODY_BYTES, ' '),
              // FIN after the bytes, so they all arrive before the close does.
              () => socket.destroy(),
            );
            return;
          case 'reset-before-head':
            stopped = true;
            socket.resetAndDestroy();
            return;
          case 'garbage':
            stopped = true;
            socket.write('HELLO\r\n\r\n');
            return;
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    received,
    acceptedSockets: () => accepted,
    openSockets: () => open.size,
    openSocketsThatCarriedRequests: () => [...open].filter((socket) => carried.has(socket)).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of open) socket.destroy();
      }),
  };
}

/** The admin listener's /metrics text. */
export async function scrapeMetrics(adminUrl: string): Promise<string> {
  const res = await fetch(`${adminUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

/**
 * The value of one sample of `name` whose labels include `labels` (summed over any other labels),
 * or 0 when there is none yet (a counter appears on its first increment).
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ([^ ]+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const sampleLabels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      sampleLabels[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([key, value]) => sampleLabels[key] === value)) total += Number(match[3]);
  }
  return total;
}

/** Current resident set size of a process (VmRSS), from /proc. */
export function rssBytesOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+) kB/m.exec(status);
  if (!match) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]) * 1024;
}

export const MIB = 1024 * 1024;

export interface GatewayReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** False when the connection ended before the whole response arrived. */
  complete: boolean;
  /** Milliseconds from sending to the end (or the cut) of the response. */
  elapsedMs: number;
}

/** One request on a fresh connection; resolves when the response has ended or was cut off. */
export function sendToGateway(
  url: string,
  options: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {},
): Promise<GatewayReply> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { ...options.headers };
    if (options.body !== undefined) headers['content-length'] = Buffer.byteLength(options.body);
    const req = http.request(url, { method: options.method ?? 'GET', headers, agent: false });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', () => {});
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          complete: res.complete,
          elapsedMs: Date.now() - started,
        }),
      );
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The JSON body of a reply, or undefined when it is not JSON. */
export function jsonBody(reply: GatewayReply): unknown {
  try {
    return JSON.parse(reply.body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

export interface StallingRedisRelay {
  /** redis://… of the relay, to give the product instead of the real Redis. */
  url: string;
  /**
   * The next time a command containing `marker` goes through, the relay forwards Redis's reply and
   * then holds this whole process (the gateway in it included) for `stallMs`, as a long GC pause or
   * a starved CPU would. Resolves once that stall is over.
   */
  stallAfterReplyTo(marker: string, stallMs: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * A TCP relay in front of a real Redis that passes every byte on unchanged. It exists to stall the
 * process at one precise moment: right after Redis has answered a given command in time, before the
 * gateway has read that answer. (The gateway must run in this process for the stall to reach it.)
 */
export async function startStallingRedisRelay(redisUrl: string): Promise<StallingRedisRelay> {
  const target = new URL(redisUrl);
  const sockets = new Set<net.Socket>();
  let armed: { marker: string; stallMs: number; done: () => void } | null = null;

  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    let stallOnNextReply: typeof armed = null;
    client.on('data', (chunk: Buffer) => {
      if (armed && chunk.includes(armed.marker)) {
        stallOnNextReply = armed;
        armed = null;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      client.write(chunk);
      if (!stallOnNextReply) return;
      const stall = stallOnNextReply;
      stallOnNextReply = null;
      const until = Date.now() + stall.stallMs;
      while (Date.now() < until) {
        // A synchronous stall: nothing else in this process runs, timers included.
      }
      stall.done();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stallAfterReplyTo(marker, stallMs) {
      return new Promise((resolve) => {
        armed = { marker, stallMs, done: resolve };
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

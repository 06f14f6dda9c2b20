import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { BenchChild } from './processes';

/**
 * `npm run bench -- --brownout`: the gateway as `npm start` runs it (dist/main.js, Redis, the
 * default config: upstream.timeoutMs 10 s, maxSockets 256) in front of an inventory that stops
 * answering for part of the run. Reports the answers by status and the slowest one, the gateway's
 * RSS, how fast its own endpoints stay, and how long traffic takes to come back. See docs/benchmark.md.
 */

export interface BrownoutSettings {
  /** Requests sent at once while the inventory hangs. */
  burst: number;
  /** Seconds of clients still arriving (`arrivalsPerSecond`) while it hangs, after the burst. */
  sustainSeconds: number;
  arrivalsPerSecond: number;
}

/** An inventory stand-in that answers, or accepts requests and never answers, as the run switches it. */
export interface SwitchableInventory {
  url: string;
  hanging: boolean;
  /** Requests received while hanging: what the gateway let through to a dead inventory. */
  receivedWhileHanging: number;
  close(): Promise<void>;
}

const PETS = Buffer.from('[{"id":1,"name":"Rex","status":"available","categoryId":1}]');

export async function startSwitchableInventory(): Promise<SwitchableInventory> {
  const sockets = new Set<net.Socket>();
  const inventory: SwitchableInventory = { url: '', hanging: false, receivedWhileHanging: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    req.resume();
    if (inventory.hanging) {
      inventory.receivedWhileHanging++;
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(PETS.length) }).end(PETS);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  inventory.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  inventory.close = () =>
    new Promise((resolve) => {
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
  return inventory;
}

interface Answer {
  status: number;
  code: string | null;
  elapsedMs: number;
}

/** One request on its own connection, as 3,000 separate clients would send it; status 0 when cut or given up. */
function timedRequest(url: string, headers: Record<string, string>, giveUpMs: number): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status: number, code: string | null) =>
      resolve({ status, code, elapsedMs: performance.now() - started });
    const req = http.request(url, { agent: false, headers, timeout: giveUpMs });
    req.on('timeout', () => req.destroy(new Error('gave up')));
    req.on('error', () => done(0, null));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', () => done(0, null));
      res.on('end', () => {
        let code: string | null = null;
        try {
          code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code?: string }).code ?? null;
        } catch {
          /* not an Error body */
        }
        done(res.statusCode ?? 0, code);
      });
    });
    req.end();
  });
}

function summarize(answers: readonly Answer[]) {
  const byStatus: Record<string, number> = {};
  for (const a of answers) {
    const label = a.status === 0 ? 'none' : `${a.status} ${a.code ?? ''}`.trim();
    byStatus[label] = (byStatus[label] ?? 0) + 1;
  }
  const sorted = answers.map((a) => a.elapsedMs).sort((x, y) => x - y);
  return {
    requests: answers.length,
    byStatus,
    p50Ms: sorted[Math.floor(sorted.length / 2)] ?? 0,
    slowestMs: sorted[sorted.length - 1] ?? 0,
  };
}

/** The slowest of a few requests to an endpoint that must stay fast while the inventory hangs. */
async function slowestOf(
  url: string,
  headers: Record<string, string>,
  times = 5,
): Promise<{ status: number; slowestMs: number }> {
  let slowestMs = 0;
  let status = 0;
  for (let i = 0; i < times; i++) {
    const answer = await timedRequest(url, headers, 5000);
    slowestMs = Math.max(slowestMs, answer.elapsedMs);
    status = answer.status;
  }
  return { status, slowestMs };
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface BrownoutTarget {
  gateway: BenchChild;
  adminUrl: string;
  adminToken: string;
}

/** The run: healthy, a burst and arrivals with the inventory hanging, then recovered. */
export async function runBrownout(settings: BrownoutSettings, inventory: SwitchableInventory, target: BrownoutTarget) {
  const { gateway } = target;
  const url = `${gateway.url}/v1/pets`;
  const auth = { authorization: `Bearer ${gateway.details.admitted}` };
  const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
  const healthy = summarize(await Promise.all(Array.from({ length: 200 }, () => timedRequest(url, auth, 30_000))));
  const rssBeforeMiB = mib(gateway.rssBytes());
  let peakRss = gateway.rssBytes();
  const rssSamples: number[] = [];
  const sampler = setInterval(() => {
    const rss = gateway.rssBytes();
    peakRss = Math.max(peakRss, rss);
    rssSamples.push(mib(rss));
  }, 1000);

  inventory.hanging = true;
  const hangStarted = performance.now();
  // The client gives up after 30 s, as the client did: "none" counts the requests never answered.
  const burst = Promise.all(Array.from({ length: settings.burst }, () => timedRequest(url, auth, 30_000)));
  await wait(500);
  const whileHanging = {
    healthz: await slowestOf(`${target.adminUrl}/healthz`, {}),
    metrics: await slowestOf(`${target.adminUrl}/metrics`, {}),
    adminKeys: await slowestOf(`${target.adminUrl}/admin/keys`, { authorization: `Bearer ${target.adminToken}` }),
    usage: await slowestOf(`${gateway.url}/v1/usage`, auth),
    unauthorized: await slowestOf(url, { authorization: 'Bearer not-a-key' }),
  };
  const burstAnswers = summarize(await burst);
  const arrivals: Array<Promise<Answer>> = [];
  for (let second = 0; second < settings.sustainSeconds; second++) {
    for (let i = 0; i < settings.arrivalsPerSecond; i++) arrivals.push(timedRequest(url, auth, 30_000));
    await wait(1000);
  }
  const sustained = summarize(await Promise.all(arrivals));
  const hangSeconds = (performance.now() - hangStarted) / 1000;

  inventory.hanging = false;
  // One request at a time until the first 200 (a probe, when a breaker guards the inventory), then
  // until ten in a row (the circuit closed: a half-open breaker refuses what its probes do not cover).
  const recoverStarted = performance.now();
  let recoveredAfterMs: number | null = null;
  let closedAfterMs: number | null = null;
  let inARow = 0;
  while (performance.now() - recoverStarted < 60_000 && closedAfterMs === null) {
    const answer = await timedRequest(url, auth, 30_000);
    inARow = answer.status === 200 ? inARow + 1 : 0;
    if (inARow === 1) recoveredAfterMs ??= Math.round(performance.now() - recoverStarted);
    if (inARow === 10) closedAfterMs = Math.round(performance.now() - recoverStarted);
    if (inARow === 0) await wait(100);
  }
  const recovered = summarize(await Promise.all(Array.from({ length: 200 }, () => timedRequest(url, auth, 30_000))));
  clearInterval(sampler);
  return {
    settings,
    healthy,
    burst: burstAnswers,
    sustained,
    whileHanging,
    hangSeconds: Math.round(hangSeconds),
    sentToHangingInventory: inventory.receivedWhileHanging,
    recoveredAfterMs,
    allAnsweredAfterMs: closedAfterMs,
    recovered,
    rss: { beforeMiB: rssBeforeMiB, peakMiB: mib(peakRss), endMiB: mib(gateway.rssBytes()), samplesMiB: rssSamples },
  };
}

/**
 * The same answers as the gateway timed them (its request log's durationMs, from the request's
 * arrival to its answer): on a busy machine the client's figures also hold the time a connection
 * waits to be accepted and the client's own event loop.
 */
export function gatewayTimings(
  logFile: string,
): Record<string, { requests: number; p50Ms: number; slowestMs: number }> {
  const byStatus: Record<string, number[]> = {};
  for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes('"msg":"request"')) continue;
    const entry = JSON.parse(line) as { status: number | null; durationMs: number; route: string };
    if (entry.route !== '/v1/pets') continue;
    (byStatus[String(entry.status)] ??= []).push(entry.durationMs);
  }
  const result: Record<string, { requests: number; p50Ms: number; slowestMs: number }> = {};
  for (const [status, durations] of Object.entries(byStatus)) {
    durations.sort((a, b) => a - b);
    result[status] = {
      requests: durations.length,
      p50Ms: durations[Math.floor(durations.length / 2)]!,
      slowestMs: durations[durations.length - 1]!,
    };
  }
  return result;
}

import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import { MAX_CLIENT_RESETS_PER_SECOND } from '../../../src/shared/http/secure-server';

/** http2.maxConcurrentStreams's default (docs/configuration.md), which this file's product keeps. */
const DEFAULT_MAX_CONCURRENT_STREAMS = 100;
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { TlsClient } from '../../support/tls-client';
import { startTestProduct, type ProductHarness } from './gateway-kit';
import { createKey } from '../../support/keys';
import { logLinesWith } from '../../support/log-lines';
import { eventually } from '../../support/eventually';

/**
 * CVE-2023-44487 ("rapid reset"): a client opens streams and resets them at once, in a loop, so the
 * server starts work for requests nobody waits for. Node's own bounds did not stop it here: with
 * the attacker in a process of its own, another client's request waited out the whole attack
 * (3.2 s). The listener now closes a session that cancels more than 100 unanswered streams in a
 * second; this shows it: while one session resets streams as fast as it can (bounded in count and
 * time, loopback only), that session is closed after a few hundred streams reach the gateway (its
 * request log counts them), and another client's requests are answered throughout. The victim's
 * latency is printed, not bounded: on a crowded machine it measured the machine as much as the attack.
 */
const ATTACK_MS = 3000;
// A hang guard: at load average 35 the first test took over 120 s (process starts, TLS handshakes).
jest.setTimeout(300_000);
const ATTACK_STREAMS = 40_000;

let certs: TestCertificates;
let product: ProductHarness;
beforeAll(async () => {
  certs = makeTestCertificates();
  product = await startTestProduct({ env: { TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.serverKey } });
});
afterAll(async () => {
  await product.close();
});

/** The victim's requests carry ids starting with this, so that the gateway's log tells them from the attacker's. */
const VICTIM_ID = 'victim-';
let victimRequests = 0;

async function latenciesMs(client: TlsClient, auth: string, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = process.hrtime.bigint();
    const headers = { authorization: auth, 'x-request-id': `${VICTIM_ID}${victimRequests++}` };
    const res = await client.request({ path: '/v1/pets', headers });
    expect(res.status).toBe(200);
    out.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return out;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * The attacker, in a process of its own (as a real one is: its CPU is not the gateway's): opens
 * and cancels streams on one session until the session is closed, the count or the time runs out,
 * and prints what it did.
 */
const ATTACKER = `
const http2 = require('node:http2');
const fs = require('node:fs');
const [url, caFile, attackMs, maxStreams, resetCode, authorization] = process.argv.slice(1);
const session = http2.connect(url, { ca: fs.readFileSync(caFile), peerMaxConcurrentStreams: 100000 });
let closedBy = null;
session.on('error', (err) => (closedBy ??= err.code || err.message));
session.on('goaway', (code) => (closedBy ??= 'GOAWAY ' + code));
session.on('close', () => (closedBy ??= 'closed'));
session.once('connect', async () => {
  const deadline = Date.now() + Number(attackMs);
  let opened = 0;
  while (opened < Number(maxStreams) && Date.now() < deadline && !session.closed && !session.destroyed) {
    for (let i = 0; i < 100 && !session.closed && !session.destroyed; i++, opened++) {
      try {
        const stream = session.request(authorization ? { ':path': '/v1/pets', authorization } : { ':path': '/v1/pets' });
        stream.on('error', () => {});
        stream.close(Number(resetCode));
      } catch { break; }
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  // Written and gone: tearing down tens of thousands of streams client-side is not the point.
  process.stdout.write(JSON.stringify({ opened, closedBy }), () => process.exit(0));
});
`;

function rapidReset(
  url: string,
  resetCode: number = http2.constants.NGHTTP2_CANCEL,
  maxStreams = ATTACK_STREAMS,
  authorization = '',
): Promise<{ opened: number; closedBy: string | null }> {
  return new Promise((resolve, reject) => {
    // No wall clock on the attacker: its own deadline and count bound it (a kill at ATTACK_MS + 10 s
    // on a crowded machine left no report to read); the test's timeout is the hang guard.
    execFile(
      process.execPath,
      ['-e', ATTACKER, url, certs.caCert, String(ATTACK_MS), String(maxStreams), String(resetCode), authorization],
      (err, stdout) => {
        if (err) return reject(err);
        if (stdout.trim() === '') return reject(new Error('the attacker printed no report'));
        resolve(JSON.parse(stdout) as { opened: number; closedBy: string | null });
      },
    );
  });
}

it('streams opened and reset in a loop: the session is closed after a few hundred, and another client is answered throughout', async () => {
  const { auth } = await createKey(product, {
    plan: 'enterprise',
    limits: { perMinute: 1_000_000, perDay: 1_000_000_000 },
  });
  const victim = new TlsClient(product.gatewayUrl, certs.caCert, 'h2');
  try {
    await latenciesMs(victim, auth, 5);
    const baseline = median(await latenciesMs(victim, auth, 30));
    const linesBefore = product.logs.lines.length;
    let attacking = true;
    const attack = rapidReset(product.gatewayUrl).finally(() => (attacking = false));
    // The attack under way before the measured requests start; they go on as long as it does.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const during: number[] = [];
    while (attacking && during.length < 2000) during.push(...(await latenciesMs(victim, auth, 1)));
    const { opened, closedBy: sessionClosedBy } = await attack;
    // Cut before the victim's first request (Node 26 closes such a session within milliseconds):
    // the victim's latency right after the attack is what it met.
    if (during.length === 0) during.push(...(await latenciesMs(victim, auth, 5)));
    const underAttack = median(during);
    process.stdout.write(
      `rapid reset: ${opened} streams opened and reset; attacker session closed by ${sessionClosedBy ?? 'nothing'}; the victim's median latency ${baseline.toFixed(1)} ms before, ${underAttack.toFixed(1)} ms over ${during.length} requests during\n`,
    );
    // Either the attack ran (hundreds of streams, the victim measured throughout), or the server cut
    // the attacker's session early: Node 26 itself sends GOAWAY after a few hundred resets.
    const cutByServer = sessionClosedBy !== null;
    expect(opened).toBeGreaterThan(cutByServer ? 100 : 500);
    // What reached the gateway: its request log lines during the attack (the attacker's client
    // queues what it cannot send, so `opened` is what it asked for, not what arrived). The session
    // is closed after 100 cancels in a second (closeOnRapidReset): a few hundred at most. Without the
    // guard thousands got in, and the victim's requests waited behind them for the whole attack (3.2 s).
    // The gateway's lines (the embedded inventory logs the requests it gets under component "inventory");
    // a request's line is written on 'finish', which may trail its answer.
    const requestLines = () => logLinesWith(product, { msg: 'request', component: undefined }, linesBefore);
    const victimLines = () => requestLines().filter((line) => String(line.requestId).startsWith(VICTIM_ID));
    await eventually(() => victimLines().length === during.length, { what: "every victim's request logged" });
    const attackerRequests = requestLines().length - victimLines().length;
    process.stdout.write(`rapid reset: ${attackerRequests} of the attacker's requests reached the gateway\n`);
    expect(attackerRequests).toBeLessThan(1000);
    // Every request of the victim's during the attack answered 200 (latenciesMs) and logged as such.
    expect(during.length).toBeGreaterThanOrEqual(cutByServer ? 1 : 10);
    expect(victimLines().map((line) => line.status)).toEqual(Array(during.length).fill(200));
    // And the gateway still answers after it.
    expect((await victim.request({ path: '/v1/pets', headers: { authorization: auth } })).status).toBe(200);
  } finally {
    victim.close();
  }
});

/**
 * Issue 42: the guard counted RST_STREAM(CANCEL) only, so a client resetting with NO_ERROR or
 * INTERNAL_ERROR got about 1,000 requests per session through. Every client reset of a stream
 * not yet answered counts, whatever its code.
 */
it.each([
  ['NO_ERROR', http2.constants.NGHTTP2_NO_ERROR],
  ['INTERNAL_ERROR', http2.constants.NGHTTP2_INTERNAL_ERROR],
  ['REFUSED_STREAM', http2.constants.NGHTTP2_REFUSED_STREAM],
  ['CANCEL', http2.constants.NGHTTP2_CANCEL],
])('a session resetting its streams with %s is closed after a few hundred at most', async (_name, code) => {
  // With a key every request waits for the limiter's Redis round trip and the inventory, so the
  // reset reaches the gateway before the answer: the work goes on for nobody (an anonymous 401
  // can be answered before the reset is read, and then cost what any request costs).
  const { auth } = await createKey(product, {
    plan: 'enterprise',
    limits: { perMinute: 1_000_000, perDay: 1_000_000_000 },
  });
  const linesBefore = product.logs.lines.length;
  const { opened, closedBy } = await rapidReset(product.gatewayUrl, code, 3000, auth);
  // What reached the gateway: its request log lines (the attacker's client queues what it cannot send).
  const times = logLinesWith(product, { msg: 'request' }, linesBefore).map((line) => Date.parse(String(line.time)));
  const reached = times.length;
  const seconds = reached === 0 ? 0 : (Math.max(...times) - Math.min(...times)) / 1000;
  process.stdout.write(
    `rapid reset with code ${code}: ${opened} opened, ${reached} reached the gateway over ${seconds.toFixed(1)} s, session closed by ${closedBy ?? 'nothing'}\n`,
  );
  // The client may have queued all it meant to send before the GOAWAY reached it: what counts is
  // what got in, and at what pace. A busy machine reads the attacker's frames more slowly, and a
  // session that resets no more than MAX_CLIENT_RESETS_PER_SECOND a second is allowed: the bound is
  // that pace over each one-second window the logged span can touch (a window opens on a stream's
  // close, which can come up to a second before the first line is written), plus the streams the
  // session holds open when it is closed (they end with it and are logged too). Before issue 42's fix
  // 1,100-1,300 got in; the bound is a few hundred. The streams the server takes in before it sees
  // the 101st reset are those it read in the meantime, more per read on a busy machine (416 over
  // 0.7 s with INTERNAL_ERROR beside a busy core, whose streams close only after the limiter's
  // round trip): under half of what got in without the guard also holds the promise.
  const HALF_WITHOUT_THE_GUARD = 550;
  expect(reached).toBeLessThan(opened);
  expect(reached).toBeLessThanOrEqual(
    Math.max(
      HALF_WITHOUT_THE_GUARD,
      MAX_CLIENT_RESETS_PER_SECOND * (Math.ceil(seconds) + 2) + DEFAULT_MAX_CONCURRENT_STREAMS,
    ),
  );
});

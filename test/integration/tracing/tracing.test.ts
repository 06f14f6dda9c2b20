import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import {} from '../admin/admin-kit';
import {
  isolatedEnv,
  LONG_ADMIN_TOKEN,
  runMain,
  LONG_SIGNING_SECRET,
  startMain,
  tempFile,
  type MainProcess,
} from '../startup/startup-kit';
import { useRedisPerFile } from '../../support/redis-per-file';
import { loadConfig } from '../../../src/shared/config';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import {
  makeTempDir,
  spawnInventoryProcess,
  stopInventoryProcess,
  TEST_SIGNING_SECRET,
  tokenSigner,
} from '../../support/inventory-harness';
import { startOtlpReceiver, SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from '../../support/otlp-receiver';
import { eventually } from '../../support/eventually';
import { logLines as parseLogLines } from '../../support/log-lines';

/**
 * CONTRACT §10 end to end: the real entry point (`src/main.ts`, the SDK started before the product
 * loads) exporting to an OTLP receiver in this test, in both encodings; and with no endpoint, the
 * client's trace headers reaching the inventory untouched and no SDK module loaded at all (prom-client loads @opentelemetry/api, the no-op facade, on its own).
 */

const READY = /created API key (key_[0-9a-f]{24}) on plan pro \(shown once\):\n {4}(asg_dev_[0-9A-Za-z]{22,})\n/;
const REPORT_OTEL_MODULES = ['-r', './test/support/report-otel-modules.js'];
const LOADED_OTEL = /loaded OpenTelemetry SDK modules: (\d+)/;

let running: MainProcess | null = null;
/** A private redis-server for the WORKERS test, as test/integration/workers does. */
const redis = useRedisPerFile();

let receiver: OtlpReceiver | null = null;

afterEach(async () => {
  if (running && running.child.exitCode === null && running.child.signalCode === null) {
    running.child.kill('SIGKILL');
    await running.exited;
  }
  running = null;
  await receiver?.close();
  receiver = null;
});

function traceparent(): { traceId: string; parentId: string; header: string } {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { traceId, parentId, header: `00-${traceId}-${parentId}-01` };
}

function logLines(main: MainProcess): Array<Record<string, unknown>> {
  return parseLogLines(main.stdout());
}

function only(spans: ReceivedSpan[], predicate: (span: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(predicate);
  if (found.length !== 1)
    throw new Error(`expected one ${what}, found ${found.length}: ${JSON.stringify(spans, null, 1)}`);
  return found[0]!;
}

describe.each([
  ['http/json', 'undici'],
  ['http/protobuf', 'http-proxy'],
])('tracing on, OTLP %s, %s forwarder', (protocol, forwarder) => {
  test('a request with a traceparent: the gateway SERVER span in that trace, its steps, the inventory and SQLite below; 401 and 429 marked; log lines carry the ids', async () => {
    const otlp = (receiver = await startOtlpReceiver());
    const env = await isolatedEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1.0',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      CONFIG_FILE: tempFile('tracing.yaml', `anonymous:\n  perMinute: 1\nupstream:\n  forwarder: ${forwarder}\n`),
    });
    const main = (running = startMain(env, { nodeArgs: REPORT_OTEL_MODULES }));
    const [, keyId, key] = await main.waitForStdout(READY);
    const gateway = `http://127.0.0.1:${env.PORT}`;

    const client = traceparent();
    const ok = await request(gateway)
      .get('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .set('traceparent', client.header)
      .set('tracestate', 'congo=t61rcWkgMzE');
    expect(ok.status).toBe(200);
    const anonymous = traceparent();
    expect((await request(gateway).get('/v1/pets').set('traceparent', anonymous.header)).status).toBe(401);
    const limited = traceparent();
    expect((await request(gateway).get('/v1/pets').set('traceparent', limited.header)).status).toBe(429);
    // A POST: its statement runs after the body is read, from the socket's events, still under the inventory's span.
    const creating = traceparent();
    const createdPet = await request(gateway)
      .post('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .set('traceparent', creating.header)
      .send({ name: 'Traced', categoryId: 1 });
    expect(createdPet.status).toBe(201);
    // A body past server.maxBodyBytes is the forward step's refusal: answered by the handler, so its span names the code.
    const oversized = traceparent();
    const tooLarge = await request(gateway)
      .post('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .set('traceparent', oversized.header)
      .send({ name: 'x'.repeat(20_000), categoryId: 1 });
    expect(tooLarge.status).toBe(413);
    // The admin /readyz asks the inventory's /healthz: a probe, which makes no trace.
    expect((await request(`http://127.0.0.1:${env.ADMIN_PORT}`).get('/readyz')).status).toBe(200);
    // An invalid traceparent starts a new trace, and its tracestate is not carried into it (W3C §3.3).
    const fresh = await request(gateway)
      .get('/v1/pets?fresh=1')
      .set('Authorization', `Bearer ${key}`)
      .set('traceparent', '00-garbage-01')
      .set('tracestate', 'congo=t61rcWkgMzE');
    expect(fresh.status).toBe(200);

    // Gateway span, 3 steps, inventory span, SQLite span; then one span each for the 401 and the 429.
    // Each span is exported when it ends, the gateway's SERVER span after the answer: wait for all of them.
    const servers = (scope: string) =>
      otlp.spans.filter((span) => span.kind === SPAN_KIND.SERVER && span.scopeName === scope).length;
    await eventually(
      async () =>
        otlp.spans.filter((span) => span.traceId === client.traceId).length >= 6 &&
        otlp.spans.filter((span) => span.traceId === limited.traceId).length >= 2 &&
        servers('animal-store-gateway') >= 6 &&
        servers('animal-store-inventory') >= 3 &&
        otlp.spans.filter((span) => span.traceId === creating.traceId).length >= 6,
      { timeoutMs: 10_000 },
    );
    expect(otlp.contentTypes[0]).toBe(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
    const trace = otlp.spans.filter((span) => span.traceId === client.traceId);

    const server = only(trace, (span) => span.parentSpanId === client.parentId, 'span under the client span');
    expect(server).toMatchObject({
      kind: SPAN_KIND.SERVER,
      name: 'GET /v1/pets',
      serviceName: 'animal-store-gateway',
      scopeName: 'animal-store-gateway',
      traceState: 'congo=t61rcWkgMzE',
      statusCode: 0,
    });
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/v1/pets',
      'url.path': '/v1/pets',
      'http.response.status_code': 200,
      'asg.plan': 'pro',
      'asg.rate_limit.decision': 'allowed',
    });

    const children = trace.filter((span) => span.parentSpanId === server.spanId);
    expect(children.map((span) => span.name).sort()).toEqual(['forward', 'key lookup', 'rate limit']);
    expect(children.find((span) => span.name === 'key lookup')!.attributes).toMatchObject({
      'asg.key.status': 'valid',
    });
    expect(children.find((span) => span.name === 'rate limit')!.attributes).toMatchObject({
      'asg.rate_limit.scope': 'key',
      'asg.rate_limit.decision': 'allowed',
    });
    const forward = children.find((span) => span.name === 'forward')!;
    expect(forward).toMatchObject({ kind: SPAN_KIND.CLIENT });
    expect(forward.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.response.status_code': 200 });

    // The inventory continued the trace from the traceparent the gateway forwarded: the forward span.
    const inventory = only(trace, (span) => span.parentSpanId === forward.spanId, 'inventory span');
    expect(inventory).toMatchObject({
      kind: SPAN_KIND.SERVER,
      name: 'GET /v1/pets',
      scopeName: 'animal-store-inventory',
      traceState: 'congo=t61rcWkgMzE',
    });
    expect(inventory.attributes).toMatchObject({ 'http.route': '/v1/pets', 'http.response.status_code': 200 });
    const sqlite = only(trace, (span) => span.parentSpanId === inventory.spanId, 'SQLite span');
    expect(sqlite).toMatchObject({ kind: SPAN_KIND.CLIENT, name: 'SELECT pets' });
    expect(sqlite.attributes).toMatchObject({
      'db.system.name': 'sqlite',
      'db.operation.name': 'SELECT',
      'asg.sqlite.statement': 'list_pets',
    });

    // 401 and 429 are spans too, marked, with the anonymous limiter's step below them.
    const unauthorized = only(
      otlp.spans,
      (span) => span.traceId === anonymous.traceId && span.kind === SPAN_KIND.SERVER,
      '401 span',
    );
    expect(unauthorized.attributes).toMatchObject({
      'http.response.status_code': 401,
      'asg.refused': true,
      'asg.error.code': 'missing_api_key',
      'asg.plan': 'anonymous',
    });
    const refused = only(
      otlp.spans,
      (span) => span.traceId === limited.traceId && span.kind === SPAN_KIND.SERVER,
      '429 span',
    );
    expect(refused.attributes).toMatchObject({
      'http.response.status_code': 429,
      'asg.refused': true,
      'asg.error.code': 'rate_limited',
    });
    const tooLargeSpan = only(
      otlp.spans,
      (span) => span.traceId === oversized.traceId && span.kind === SPAN_KIND.SERVER,
      '413 span',
    );
    expect(tooLargeSpan.attributes).toMatchObject({
      'http.response.status_code': 413,
      'asg.error.code': 'payload_too_large',
    });
    const refusedStep = only(otlp.spans, (span) => span.parentSpanId === refused.spanId, '429 step');
    expect(refusedStep.attributes).toMatchObject({
      'asg.rate_limit.scope': 'address',
      'asg.rate_limit.decision': 'limited',
    });

    const createTrace = otlp.spans.filter((span) => span.traceId === creating.traceId);
    const createInventory = only(
      createTrace,
      (span) => span.kind === SPAN_KIND.SERVER && span.scopeName === 'animal-store-inventory',
      'inventory span of the POST',
    );
    expect(createInventory).toMatchObject({ name: 'POST /v1/pets' });
    expect(only(createTrace, (span) => span.parentSpanId === createInventory.spanId, 'INSERT span')).toMatchObject({
      name: 'INSERT pets',
      attributes: { 'db.operation.name': 'INSERT', 'asg.sqlite.statement': 'insert_pet' },
    });
    // The body's values never reach an attribute.
    expect(createTrace.flatMap((span) => Object.values(span.attributes)).filter((value) => value === 'Traced')).toEqual(
      [],
    );

    const freshRoot = only(
      otlp.spans,
      (span) =>
        span.kind === SPAN_KIND.SERVER &&
        span.scopeName === 'animal-store-gateway' &&
        span.parentSpanId === '' &&
        span.attributes['http.route'] === '/v1/pets',
      'new root span',
    );
    const freshInventory = only(
      otlp.spans,
      (span) =>
        span.traceId === freshRoot.traceId &&
        span.scopeName === 'animal-store-inventory' &&
        span.kind === SPAN_KIND.SERVER,
      'inventory span of the new trace',
    );
    expect([freshRoot.traceState, freshInventory.traceState]).toEqual(['', '']);
    // Probes of the inventory make no traces: only the API is traced.
    const inventoryServers = otlp.spans.filter(
      (span) => span.scopeName === 'animal-store-inventory' && span.kind === SPAN_KIND.SERVER,
    );
    expect(inventoryServers.filter((span) => !String(span.attributes['url.path']).startsWith('/v1/'))).toEqual([]);

    // Never a key, key id or token in any attribute.
    const values = otlp.spans.flatMap((span) => Object.values(span.attributes).map(String));
    for (const secret of [key!, keyId!, 'asg_dev_'])
      expect(values.filter((value) => value.includes(secret))).toEqual([]);

    // A log line leads to its trace: the gateway's request line and the inventory's.
    const requestLines = () =>
      logLines(main).filter((line) => line.msg === 'request' && line.requestId === ok.headers['x-request-id']);
    // stdout reaches this process through a pipe, on its own time.
    await eventually(async () => requestLines().length === 2);
    const gatewayLine = requestLines().find((line) => line.component === undefined);
    expect(gatewayLine).toMatchObject({ trace_id: client.traceId, span_id: server.spanId, status: 200 });
    const inventoryLine = requestLines().find((line) => line.component === 'inventory');
    expect(inventoryLine).toMatchObject({ trace_id: client.traceId, span_id: inventory.spanId, status: 200 });

    main.child.kill('SIGTERM');
    expect(await main.exited).toBe(0);
    expect(Number(main.stderr().match(LOADED_OTEL)?.[1])).toBeGreaterThan(0);
  });
});

test.each(['undici', 'http-proxy'])(
  'tracing off, %s forwarder: the client traceparent and tracestate reach the inventory unchanged, and no OpenTelemetry SDK module is loaded',
  async (forwarder) => {
    const seen: http.IncomingHttpHeaders[] = [];
    const upstream = http.createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"items":[]}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    try {
      const env = await isolatedEnv({
        INVENTORY_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
        CONFIG_FILE: tempFile('off.yaml', `upstream:\n  forwarder: ${forwarder}\n`),
      });
      const main = (running = startMain(env, { nodeArgs: REPORT_OTEL_MODULES }));
      const [, , key] = await main.waitForStdout(READY);
      const client = traceparent();
      const tracestate = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';
      const res = await request(`http://127.0.0.1:${env.PORT}`)
        .get('/v1/pets')
        .set('Authorization', `Bearer ${key}`)
        .set('traceparent', client.header)
        .set('tracestate', tracestate);
      expect(res.status).toBe(200);
      const forwarded = seen.filter((headers) => headers['x-request-id'] === res.headers['x-request-id']);
      expect(forwarded).toHaveLength(1);
      expect(forwarded[0]).toMatchObject({ traceparent: client.header, tracestate });
      expect(logLines(main).some((line) => 'trace_id' in line)).toBe(false);

      main.child.kill('SIGTERM');
      expect(await main.exited).toBe(0);
      expect(main.stderr()).toMatch(LOADED_OTEL);
      expect(main.stderr().match(LOADED_OTEL)![1]).toBe('0');
    } finally {
      await new Promise((resolve) => upstream.close(resolve));
    }
  },
);

test("WORKERS=2 with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: every worker exports its gateway spans; the supervisor exports the embedded inventory's", async () => {
  const otlp = (receiver = await startOtlpReceiver());
  const env = await isolatedEnv({
    APP_ENV: 'staging',
    ADMIN_TOKEN: LONG_ADMIN_TOKEN,
    SIGNING_SECRET: LONG_SIGNING_SECRET,
    REDIS_URL: redis.url,
    WORKERS: '2',
    CONFIG_FILE: tempFile('workers.yaml', 'redis:\n  namespace: "asg:tracing"\n'),
    // The traces-only variable, a full URL used as it is.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/v1/traces`,
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  const main = (running = startMain(env));
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+ with 2 workers"/);
  const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;
  const created = await request(adminUrl)
    .post('/admin/keys')
    .set('Authorization', `Bearer ${LONG_ADMIN_TOKEN}`)
    .send({ name: 'traced', plan: 'pro' });
  expect(created.status).toBe(201);

  // Fresh connections, so that the cluster's round robin spreads them over both workers.
  const traceIds: string[] = [];
  for (let i = 0; i < 12; i++) {
    const client = traceparent();
    traceIds.push(client.traceId);
    const res = await fetch(`http://127.0.0.1:${env.PORT}/v1/pets`, {
      headers: {
        authorization: `Bearer ${created.body.key as string}`,
        traceparent: client.header,
        connection: 'close',
      },
    });
    expect(res.status).toBe(200);
  }
  const servers = (scope: string) =>
    otlp.spans.filter(
      (span) => span.kind === SPAN_KIND.SERVER && span.scopeName === scope && traceIds.includes(span.traceId),
    );
  await eventually(
    async () => servers('animal-store-gateway').length === 12 && servers('animal-store-inventory').length === 12,
    { timeoutMs: 10_000 },
  );

  const gatewayPids = new Set(servers('animal-store-gateway').map((span) => span.resource['process.pid']));
  expect(gatewayPids.size).toBe(2);
  expect(gatewayPids.has(main.child.pid!)).toBe(false);
  expect(new Set(servers('animal-store-inventory').map((span) => span.resource['process.pid']))).toEqual(
    new Set([main.child.pid]),
  );
});

test('a bad OTEL_* value with an endpoint set stops startup with one line per bad setting, never a stack trace', async () => {
  const env = await isolatedEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    OTEL_TRACES_SAMPLER: 'sometimes',
  });
  const { code, stderr } = await runMain(env);
  expect(code).toBe(1);
  expect(stderr.trimEnd().split('\n')).toEqual([
    'animal-store-gateway: invalid setting OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported; use http/protobuf or http/json',
    'animal-store-gateway: invalid setting OTEL_TRACES_SAMPLER: "sometimes" is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
  ]);
});

test('the standalone inventory (src/inventory/main.ts) continues a trace under its own service name and exports its queued spans on SIGTERM', async () => {
  const otlp = (receiver = await startOtlpReceiver());
  // The default 5 s batch delay: only the export at shutdown can deliver the spans in time.
  const inventory = await spawnInventoryProcess({
    dataDir: makeTempDir('tracing-inventory'),
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url },
  });
  const signer = tokenSigner(loadConfig({ env: {}, overrides: { signing: { secret: TEST_SIGNING_SECRET } } }));
  const client = traceparent();
  const res = await request(inventory.url)
    .get('/v1/pets/1')
    .set(UPSTREAM_TOKEN_HEADER, await signer.sign({ keyId: 'key_0123456789abcdef01234567', plan: 'pro' }))
    .set('traceparent', client.header);
  expect(res.status).toBe(404);
  expect(await stopInventoryProcess(inventory, 'SIGTERM')).toEqual({ code: 0, signal: null });

  const trace = otlp.spans.filter((span) => span.traceId === client.traceId);
  const server = only(trace, (span) => span.parentSpanId === client.parentId, 'inventory span');
  expect(server).toMatchObject({
    kind: SPAN_KIND.SERVER,
    name: 'GET /v1/pets/{petId}',
    serviceName: 'animal-store-inventory',
  });
  expect(server.attributes).toMatchObject({ 'http.route': '/v1/pets/{petId}', 'http.response.status_code': 404 });
  expect(only(trace, (span) => span.parentSpanId === server.spanId, 'SQLite span').attributes).toMatchObject({
    'asg.sqlite.statement': 'get_pet',
  });
  expect(
    trace.flatMap((span) => Object.values(span.attributes).map(String)).filter((value) => value.includes('key_0123')),
  ).toEqual([]);
});

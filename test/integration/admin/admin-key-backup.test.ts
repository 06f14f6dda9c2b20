import http from 'node:http';
import request from 'supertest';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest, gatewayGet, sha256Hex } from './admin-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * GET /admin/keys/export and POST /admin/keys/import (CONTRACT §5): a backup taken on one gateway
 * and loaded into a gateway on a fresh redis-server gives the same keys, ids and states; a second
 * import changes nothing; a bad line or another environment's prefix imports nothing; the
 * in-process (SQLite) store takes the same file.
 */

let source: ProductHarness;
let freshRedis: RedisProcess;
const started: ProductHarness[] = [];

async function product(options: Parameters<typeof startTestProduct>[0] = {}): Promise<ProductHarness> {
  const p = await startTestProduct(options);
  started.push(p);
  return p;
}

const keys: Record<string, { id: string; key: string }> = {};
let rotatedNewKey = '';
let backup = '';

beforeAll(async () => {
  freshRedis = await startRedisServer();
  source = await product();
  keys.active = await createKey(source, { name: 'active', plan: 'pro' }, { overApi: true });
  keys.custom = await createKey(
    source,
    { name: 'custom', plan: 'enterprise', limits: { perMinute: 7, perDay: 70 } },
    { overApi: true },
  );
  keys.revoked = await createKey(source, { name: 'revoked', plan: 'free' }, { overApi: true });
  keys.rotated = await createKey(source, { name: 'rotated', plan: 'free' }, { overApi: true });
  const expiring = await adminRequest(source, 'post', '/admin/keys').send({
    name: 'expiring',
    plan: 'free',
    expiresAt: '2031-01-01T00:00:00Z',
  });
  keys.expiring = expiring.body as { id: string; key: string };
  await adminRequest(source, 'delete', `/admin/keys/${keys.revoked!.id}`).expect(204);
  const rotated = await adminRequest(source, 'post', `/admin/keys/${keys.rotated!.id}/rotate`)
    .send({ graceSeconds: 3600 })
    .expect(201);
  rotatedNewKey = (rotated.body as { key: string }).key;
  const res = await adminRequest(source, 'get', '/admin/keys/export').expect(200);
  backup = res.text;
}, 30_000);

afterAll(async () => {
  for (const p of started) await p.close();
  await freshRedis?.stop();
});

/** An export's lines in no set order (HSCAN's on Redis): compared as a sorted list. */
function sortedLines(text: string): string[] {
  return text.trimEnd().split('\n').sort();
}

function importBody(target: ProductHarness, body: string, type = 'application/x-ndjson'): request.Test {
  return adminRequest(target, 'post', '/admin/keys/import').set('Content-Type', type).send(body);
}

test('the export is NDJSON, one line per record, with hashes and states and never a key in clear', async () => {
  const res = await adminRequest(source, 'get', '/admin/keys/export').expect(200);
  expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
  const lines = res.text
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(lines.map((l) => l.name).sort()).toEqual(['active', 'custom', 'expiring', 'revoked', 'rotated']);
  for (const { key } of Object.values(keys)) expect(res.text).not.toContain(key);
  expect(res.text).not.toContain(rotatedNewKey);
  const byName = Object.fromEntries(lines.map((l) => [l.name, l]));
  expect(byName.active).toMatchObject({
    v: 1,
    prefix: 'asg_dev_',
    id: keys.active!.id,
    plan: 'pro',
    limits: null,
    hash: sha256Hex(keys.active!.key),
    revokedAt: null,
  });
  expect(byName.custom).toMatchObject({ limits: { perMinute: 7, perDay: 70 } });
  expect(byName.revoked!.revokedAt).toEqual(expect.any(String));
  expect(byName.rotated).toMatchObject({
    hash: sha256Hex(rotatedNewKey),
    previousHash: sha256Hex(keys.rotated!.key),
    previousKeyExpiresAt: expect.any(String),
  });
  expect(byName.expiring).toMatchObject({ expiresAt: '2031-01-01T00:00:00.000Z' });
});

test('import into a gateway on a fresh redis-server: same ids and states, every secret answers as before; a second import changes nothing', async () => {
  const target = await product({ overrides: { redis: { url: freshRedis.url } } });
  await adminRequest(target, 'get', '/admin/keys').expect(200, []);
  const first = await importBody(target, backup).expect(200);
  expect(first.body).toEqual({ imported: 5, unchanged: 0 });
  const second = await importBody(target, backup).expect(200);
  expect(second.body).toEqual({ imported: 0, unchanged: 5 });

  const strip = (list: Array<Record<string, unknown>>) => list.map(({ lastUsedAt: _l, ...rest }) => rest);
  const [before, after] = await Promise.all([
    adminRequest(source, 'get', '/admin/keys'),
    adminRequest(target, 'get', '/admin/keys'),
  ]);
  expect(strip(after.body as Array<Record<string, unknown>>)).toEqual(
    strip(before.body as Array<Record<string, unknown>>),
  );
  const reexport = await adminRequest(target, 'get', '/admin/keys/export').expect(200);
  expect(sortedLines(reexport.text)).toEqual(sortedLines(backup));

  await gatewayGet(target, keys.active!.key).expect(200);
  await gatewayGet(target, keys.custom!.key).expect(200).expect('X-RateLimit-Limit', '7');
  expectError(await gatewayGet(target, keys.revoked!.key), 401, 'revoked_api_key');
  await gatewayGet(target, keys.rotated!.key).expect(200);
  await gatewayGet(target, rotatedNewKey).expect(200);
  const audit = await adminRequest(target, 'get', '/admin/audit?limit=5').expect(200);
  expect(
    (audit.body as { entries: Array<Record<string, unknown>> }).entries
      .filter((e) => e.action === 'import')
      .map((e) => e.details),
  ).toEqual([
    { imported: 0, unchanged: 5, ids: [] },
    { imported: 5, unchanged: 0, ids: expect.arrayContaining(Object.values(keys).map((k) => k.id)) },
  ]);
}, 30_000);

test('import brings a changed record back to the exported state (a rename made since is undone, as the file says)', async () => {
  const target = await product();
  await importBody(target, backup).expect(200, { imported: 5, unchanged: 0 });
  await adminRequest(target, 'patch', `/admin/keys/${keys.active!.id}`).send({ name: 'renamed' }).expect(200);
  await importBody(target, backup).expect(200, { imported: 1, unchanged: 4 });
  const shown = await adminRequest(target, 'get', `/admin/keys/${keys.active!.id}`).expect(200);
  expect((shown.body as { name: string }).name).toBe('active');
}, 30_000);

test('a malformed line answers 400 naming its line number, and nothing is imported', async () => {
  const target = await product();
  const lines = backup.trimEnd().split('\n');
  const broken = [lines[0], lines[1], '{"v":1,"prefix":"asg_dev_","id":"key_nope"}', lines[3]].join('\n');
  const res = await importBody(target, broken);
  expectError(res, 400, 'validation_failed');
  expect((res.body as { message: string }).message).toMatch(/line 3: id is missing or malformed/);
  expectError(await importBody(target, `${lines[0]}\nnot json\n`), 400, 'validation_failed');
  await adminRequest(target, 'get', '/admin/keys').expect(200, []);
  expectError(await importBody(target, backup, 'application/xml'), 415, 'unsupported_media_type');
  expectError(await request(target.adminUrl).post('/admin/keys/import').send(backup), 401, 'missing_api_key');
}, 30_000);

test("another environment's keys are refused by their prefix: staging keys do not go into production", async () => {
  const production = await product({ overrides: { keys: { prefix: 'asg_live_' } } });
  const res = await importBody(production, backup);
  expectError(res, 400, 'validation_failed');
  expect((res.body as { message: string }).message).toMatch(
    /line 1: key of prefix asg_dev_ refused: this gateway issues and accepts asg_live_ keys only/,
  );
  await adminRequest(production, 'get', '/admin/keys').expect(200, []);
}, 30_000);

test('a record whose secret another id holds here is a 409 conflict, nothing imported', async () => {
  const lines = backup.trimEnd().split('\n');
  const active = lines.find((line) => line.includes(keys.active!.id))!;
  const clash = active.replace(keys.active!.id, 'key_0123456789abcdef01234567');
  const res = await importBody(source, [lines.find((line) => line !== active), clash].join('\n'));
  expectError(res, 409, 'conflict');
  await adminRequest(source, 'get', '/admin/keys/key_0123456789abcdef01234567').expect(404);
}, 30_000);

test('the in-process store (SQLite under DATA_DIR) takes the same file, keeps it over a restart, and a second import changes nothing', async () => {
  const local = await product({ redis: false });
  await importBody(local, backup).expect(200, { imported: 5, unchanged: 0 });
  expectError(await gatewayGet(local, keys.revoked!.key), 401, 'revoked_api_key');
  await gatewayGet(local, keys.rotated!.key).expect(200);
  await local.close();
  started.splice(started.indexOf(local), 1);
  const restarted = await product({ redis: false, dataDir: local.dataDir });
  await importBody(restarted, backup).expect(200, { imported: 0, unchanged: 5 });
  const reexport = await adminRequest(restarted, 'get', '/admin/keys/export').expect(200);
  expect(sortedLines(reexport.text)).toEqual(sortedLines(backup));
  await gatewayGet(restarted, rotatedNewKey).expect(200);
}, 30_000);

/**
 * Every admin write of CONTRACT §5 (but POST /admin/secret-scanning, which revokes as a holder's
 * own revocation below does) and a holder's revocation, ending in the documented consumer lifecycle: a consumer's keys revoked, then the consumer deleted (204, as its 409 says).
 */
async function everyAdminAction(p: ProductHarness): Promise<void> {
  const post = (path: string, body: object) => adminRequest(p, 'post', path).send(body);
  const patch = (path: string, body: object) => adminRequest(p, 'patch', path).send(body);
  const acme = (
    await post('/admin/consumers', {
      name: 'Acme',
      limits: { perMinute: 50, perMonth: 1000 },
      billingDay: 5,
      allowedOperations: ['listPets', 'getPet'],
      allowedAddresses: ['127.0.0.1', '10.0.0.0/8'],
    }).expect(201)
  ).body as { id: string };
  await patch(`/admin/consumers/${acme.id}`, { name: 'Acme Ltd', allowedAddresses: null }).expect(200);
  await post(`/admin/consumers/${acme.id}/credits`, { units: 10 }).expect(200);
  await post(`/admin/consumers/${acme.id}/windows/reset`, { windows: ['minute'] }).expect(200);
  const other = (await post('/admin/consumers', { name: 'Other' }).expect(201)).body as { id: string };
  const gone = (await post('/admin/consumers', { name: 'Gone', limits: { perDay: 100 } }).expect(201)).body as {
    id: string;
  };

  const plain = await createKey(p, { name: 'plain', plan: 'free' }, { overApi: true });
  const member = await createKey(p, { name: 'member', plan: 'pro', consumerId: acme.id }, { overApi: true });
  const custom = await createKey(
    p,
    {
      name: 'custom',
      plan: 'enterprise',
      limits: { perMinute: 5, perDay: 50, perMonth: 500, maxInFlight: 2 },
      billingDay: 9,
      expiresAt: '2031-06-01T00:00:00Z',
      allowedOperations: ['listPets'],
      allowedAddresses: ['127.0.0.1'],
    },
    { overApi: true },
  );
  const moved = await createKey(p, { name: 'moved', plan: 'free', consumerId: acme.id }, { overApi: true });
  const holder = await createKey(p, { name: 'holder', plan: 'free' }, { overApi: true });
  const goneKeys = [
    await createKey(p, { name: 'gone 1', plan: 'free', consumerId: gone.id }, { overApi: true }),
    await createKey(p, { name: 'gone 2', plan: 'pro', consumerId: gone.id }, { overApi: true }),
  ];

  await patch(`/admin/keys/${custom.id}`, {
    name: 'custom renamed',
    expiresAt: null,
    limits: { perMinute: 6, perDay: 60, perMonth: 600, maxInFlight: 3 },
  }).expect(200);
  await patch(`/admin/keys/${moved.id}`, { consumerId: other.id }).expect(200);
  await patch(`/admin/keys/${plain.id}`, { consumerId: acme.id, allowedOperations: ['getPet'] }).expect(200);
  await patch(`/admin/keys/${plain.id}`, { consumerId: null, allowedOperations: null }).expect(200);
  await post(`/admin/keys/${member.id}/rotate`, { graceSeconds: 600 }).expect(201);
  await post(`/admin/keys/${custom.id}/credits`, { units: 25 }).expect(200);
  await post(`/admin/keys/${plain.id}/windows/reset`, { windows: ['minute', 'day'] }).expect(200);
  await adminRequest(p, 'delete', `/admin/keys/${plain.id}/ban`).expect(204);
  // A leaked key revoked by whoever holds it (POST /v1/keys/revoke).
  await request(p.gatewayUrl).post('/v1/keys/revoke').set('Authorization', `Bearer ${holder.key}`).expect(204);
  // The documented lifecycle: the consumer's keys revoked, then the consumer deleted.
  expectError(await adminRequest(p, 'delete', `/admin/consumers/${gone.id}`), 409, 'conflict');
  for (const key of goneKeys) await adminRequest(p, 'delete', `/admin/keys/${key.id}`).expect(204);
  await adminRequest(p, 'delete', `/admin/consumers/${gone.id}`).expect(204);
}

describe.each([
  ['in process (SQLite)', { redis: false }],
  ['on Redis', {}],
] as const)('an export always imports, whatever admin actions came before it: %s', (_store, options) => {
  test('after every admin write (a consumer deleted once its keys were revoked): into a fresh instance and back into its own, 200 and the same export', async () => {
    const own = await product(options);
    await everyAdminAction(own);
    const exported = (await adminRequest(own, 'get', '/admin/keys/export').expect(200)).text;
    const lineCount = sortedLines(exported).length;
    expect(lineCount).toBe(2 + 7); // Acme and Other; seven keys, the deleted consumer's two among them

    const fresh = await product(options);
    const intoFresh = await importBody(fresh, exported);
    expect({ status: intoFresh.status, body: intoFresh.body as unknown }).toEqual({
      status: 200,
      body: { imported: lineCount, unchanged: 0 },
    });
    expect(sortedLines((await adminRequest(fresh, 'get', '/admin/keys/export').expect(200)).text)).toEqual(
      sortedLines(exported),
    );

    const backIntoOwn = await importBody(own, exported);
    expect({ status: backIntoOwn.status, body: backIntoOwn.body as unknown }).toEqual({
      status: 200,
      body: { imported: 0, unchanged: lineCount },
    });
    expect(sortedLines((await adminRequest(own, 'get', '/admin/keys/export').expect(200)).text)).toEqual(
      sortedLines(exported),
    );
  }, 60_000);
});

test('a line over the cap (64 KiB) is refused as soon as it passes it, before the rest arrives: 400 naming the line, nothing imported', async () => {
  const target = await product();
  const req = http.request(new URL('/admin/keys/import', target.adminUrl), {
    method: 'POST',
    headers: { Authorization: `Bearer ${target.adminToken}`, 'Content-Type': 'application/x-ndjson' },
  });
  const answer = new Promise<{ status: number; body: string; connection: string | undefined }>((resolve, reject) => {
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body, connection: res.headers.connection }));
    });
    req.on('error', reject);
  });
  req.write(backup.split('\n')[0] + '\n');
  // 4 MB of one line, and the body left open: a reader that waits for the line's end never answers.
  for (let i = 0; i < 4; i++) req.write(Buffer.alloc(1024 * 1024, 'x'));
  const { status, body, connection } = await answer;
  req.destroy();
  expect({ status, body: JSON.parse(body) as unknown }).toEqual({
    status: 400,
    body: {
      code: 'validation_failed',
      message: "Nothing imported: line 2: longer than 65536 bytes (an export's lines are a few KB at most).",
      status: 400,
    },
  });
  // The rest of the body is never read: the gateway closes the connection rather than hold it.
  expect(connection).toBe('close');
  // The whole body sent at once (curl --data-binary): the same answer.
  const whole = await importBody(target, `${backup.split('\n')[0]}\n${'x'.repeat(8 * 1024 * 1024)}\n`);
  expectError(whole, 400, 'validation_failed');
  expect((whole.body as { message: string }).message).toMatch(/^Nothing imported: line 2: longer than 65536 bytes/);
  await adminRequest(target, 'get', '/admin/keys').expect(200, []);
}, 30_000);

import path from 'node:path';
import Database from 'better-sqlite3';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest } from '../admin/admin-kit';
import { expectError } from '../../support/errors';
import { eventually } from '../../support/eventually';

/**
 * `consumers.sqlite` (the in-process consumer store) is opened like every other SQLite file of the
 * gateway: config `storage.busyTimeoutMs` bounds a write's wait for another connection's lock,
 * each failed statement is counted in `gateway_sqlite_errors_total{database="consumers"}`, a lock
 * held past the timeout is a 503 with the contract's Error body (never a 500), and `/readyz`'s
 * write probe names the consumers database until the lock goes. (A full disk: keys-on-full-disk.)
 */
const BUSY_TIMEOUT_MS = 150;
let product: ProductHarness;

beforeAll(async () => {
  product = await startTestProduct({ redis: false, overrides: { storage: { busyTimeoutMs: BUSY_TIMEOUT_MS } } });
}, 30_000);

afterAll(async () => {
  await product?.close();
});

async function busyErrors(): Promise<number> {
  const text = await (await fetch(`${product.adminUrl}/metrics`)).text();
  const line = /^gateway_sqlite_errors_total\{[^}]*database="consumers"[^}]*code="SQLITE_BUSY"[^}]*\} (\d+)/m.exec(
    text,
  );
  return Number(line?.[1] ?? 0);
}

test('a write lock held past storage.busyTimeoutMs: 503 with the Error body, counted, /readyz names the consumers database; 201 once it goes', async () => {
  const created = await adminRequest(product, 'post', '/admin/consumers').send({ name: 'before the lock' });
  expect(created.status).toBe(201);
  const holder = new Database(path.join(product.dataDir, 'consumers.sqlite'));
  try {
    holder.exec('BEGIN IMMEDIATE');
    const before = await busyErrors();
    const refused = await adminRequest(product, 'post', '/admin/consumers').send({ name: 'during the lock' });
    expectError(refused, 503, 'service_unavailable');
    expect(refused.headers['retry-after']).toEqual(expect.any(String));
    expect(await busyErrors()).toBeGreaterThan(before);
    await eventually(
      async () => {
        const res = await fetch(`${product.adminUrl}/readyz`);
        const body = (await res.json()) as { failing?: string[] };
        return res.status === 503 && (body.failing ?? []).includes('consumers database');
      },
      { timeoutMs: 5000, what: '/readyz names the consumers database' },
    );
    holder.exec('ROLLBACK');
  } finally {
    holder.close();
  }
  const names = ((await adminRequest(product, 'get', '/admin/consumers')).body as Array<{ name: string }>).map(
    (c) => c.name,
  );
  expect(names).toEqual(['before the lock']);
  expect((await adminRequest(product, 'post', '/admin/consumers').send({ name: 'after' })).status).toBe(201);
  await eventually(async () => (await fetch(`${product.adminUrl}/readyz`)).status === 200, {
    timeoutMs: 5000,
    what: 'ready again',
  });
});

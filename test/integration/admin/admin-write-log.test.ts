import { hashApiKey } from '../../../src/keys/key-format';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest, gatewayGet, logRecords } from './admin-kit';
import { createKey } from '../../support/keys';

/**
 * Issue 15: the shared audit trail came in beside the `admin <action>` log line each admin write has
 * always written, and the line must stay: operators grep for it and ship it with the other logs.
 * Each write over the admin API (create, update, rotate, unban, revoke) writes exactly one such line,
 * with the action, the key id and the operator's address; a refused write writes none; and no
 * captured line holds a key, a key's hash or the admin token.
 */

describe('each admin write keeps its `admin <action>` log line', () => {
  let product: ProductHarness;

  beforeAll(async () => {
    // Banned after the second refusal, so that the unban lifts a real ban.
    product = await startTestProduct({
      redis: false,
      overrides: { ban: { threshold: 1, windowSeconds: 60, durationSeconds: 600 } },
    });
  });

  afterAll(async () => {
    await product?.close();
  });

  /** The `admin <action>` lines written since `from` (an index into the captured lines). */
  const adminLines = (from: number) =>
    logRecords(product)
      .slice(from)
      .filter(
        (entry) =>
          typeof entry.msg === 'string' && entry.msg.startsWith('admin ') && entry.msg !== 'admin token refused',
      );

  /** Runs one write and returns the single line it logged. */
  async function lineOf(write: () => Promise<unknown>): Promise<Record<string, unknown>> {
    const from = product.logs.lines.length;
    await write();
    const lines = adminLines(from);
    expect(lines).toHaveLength(1);
    return lines[0]!;
  }

  it('create, update, rotate, unban and revoke: one line each with the action and key id, no secret anywhere', async () => {
    let created!: { id: string; key: string };
    const create = await lineOf(async () => {
      created = await createKey(
        product,
        { name: 'logged', plan: 'free', limits: { perMinute: 1, perDay: 100 } },
        { overApi: true },
      );
    });

    const update = await lineOf(() =>
      adminRequest(product, 'patch', `/admin/keys/${created.id}`)
        .send({ name: 'logged, renamed', plan: 'pro' })
        .expect(200),
    );

    let rotatedKey!: string;
    const rotate = await lineOf(async () => {
      const res = await adminRequest(product, 'post', `/admin/keys/${created.id}/rotate`)
        .send({ graceSeconds: 60 })
        .expect(201);
      rotatedKey = (res.body as { key: string }).key;
    });

    // The per-key limits of 1 a minute survive the plan change: one admitted, then refusals until the ban.
    expect((await gatewayGet(product, rotatedKey)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await gatewayGet(product, rotatedKey)).status).toBe(429);
    const banned = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect((banned.body as { bannedUntil: string | null }).bannedUntil).not.toBeNull();

    const unban = await lineOf(() => adminRequest(product, 'delete', `/admin/keys/${created.id}/ban`).expect(204));
    const unbanned = await adminRequest(product, 'get', `/admin/keys/${created.id}`).expect(200);
    expect((unbanned.body as { bannedUntil: string | null }).bannedUntil).toBeNull();

    const revoke = await lineOf(() => adminRequest(product, 'delete', `/admin/keys/${created.id}`).expect(204));

    const lines = { create, update, rotate, unban, revoke };
    for (const [action, line] of Object.entries(lines)) {
      expect({ action, line }).toEqual({
        action,
        line: expect.objectContaining({
          msg: `admin ${action}`,
          action,
          keyId: created.id,
          audit: true,
          admin: '127.0.0.1',
          component: 'admin',
          level: 30,
        }),
      });
    }

    const text = product.logs.text();
    for (const secret of [created.key, rotatedKey]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(secret.slice(-20));
      expect(text).not.toContain(hashApiKey(secret));
    }
    expect(text).not.toContain(product.adminToken);
  });

  it('a refused write (unknown key, rotating a revoked key, a bad body) writes no line', async () => {
    const revoked = await createKey(product, { name: 'revoked', plan: 'free' }, { overApi: true });
    await adminRequest(product, 'delete', `/admin/keys/${revoked.id}`).expect(204);
    const unknown = 'key_000000000000000000000000';

    const from = product.logs.lines.length;
    await adminRequest(product, 'patch', `/admin/keys/${unknown}`).send({ name: 'nobody' }).expect(404);
    await adminRequest(product, 'delete', `/admin/keys/${unknown}`).expect(404);
    await adminRequest(product, 'delete', `/admin/keys/${unknown}/ban`).expect(404);
    await adminRequest(product, 'post', `/admin/keys/${unknown}/rotate`).send({}).expect(404);
    await adminRequest(product, 'post', `/admin/keys/${revoked.id}/rotate`).send({}).expect(409);
    await adminRequest(product, 'post', '/admin/keys').send({ name: 'no such plan', plan: 'platinum' }).expect(400);
    expect(adminLines(from)).toEqual([]);
  });
});

import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest } from '../admin/admin-kit';
import { expectError } from '../../support/errors';

/**
 * /admin/consumers and a key's consumerId over real HTTP (CONTRACT §5), on Redis and in process:
 * the lifecycle, the audit entries, and every bad input answered with the Error body.
 */
describe.each([
  ['on Redis', true],
  ['in process', false],
] as const)('consumers admin API %s', (_label, redis) => {
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({ redis, overrides: { costs: [{ method: 'POST', path: '/pets', cost: 5 }] } });
  });
  afterAll(() => product?.close());

  const createConsumer = async (body: Record<string, unknown>) => {
    const res = await adminRequest(product, 'post', '/admin/consumers').send(body);
    expect(res.status).toBe(201);
    return res.body as { id: string; name: string };
  };

  it('creates, lists, reads (with keyIds and usage), changes and deletes a consumer, each write audited', async () => {
    const created = await createConsumer({ name: ' Acme ', limits: { perMinute: 10, perMonth: 1000 }, billingDay: 9 });
    expect(created).toEqual({
      id: expect.stringMatching(/^con_[0-9a-f]{24}$/),
      name: 'Acme',
      limits: { perMinute: 10, perMonth: 1000 },
      billingDay: 9,
      allowedOperations: null,
      allowedAddresses: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const key = await adminRequest(product, 'post', '/admin/keys').send({
      name: 'ci',
      plan: 'pro',
      consumerId: created.id,
    });
    expect(key.status).toBe(201);
    expect(key.body.consumerId).toBe(created.id);

    const list = await adminRequest(product, 'get', '/admin/consumers');
    expect(list.body).toEqual(expect.arrayContaining([expect.objectContaining({ id: created.id, name: 'Acme' })]));
    const one = await adminRequest(product, 'get', `/admin/consumers/${created.id}`);
    expect(one.status).toBe(200);
    expect(one.body.keyIds).toEqual([key.body.id]);
    expect(one.body.usage).toEqual({
      minute: { limit: 10, remaining: 10, reset: expect.any(Number) },
      month: {
        limit: 1000,
        remaining: 1000,
        reset: expect.any(Number),
        credits: 0,
        startsAt: expect.stringMatching(/-09T00:00:00.000Z$/),
      },
    });

    const patched = await adminRequest(product, 'patch', `/admin/consumers/${created.id}`).send({
      name: 'Acme Ltd',
      limits: { perDay: 50 },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Acme Ltd', limits: { perDay: 50 } });

    const credits = await adminRequest(product, 'post', `/admin/consumers/${created.id}/credits`).send({ units: 5 });
    expectError(credits, 409, 'conflict');

    // A key that is not revoked holds the consumer: 409, nothing deleted.
    expectError(await adminRequest(product, 'delete', `/admin/consumers/${created.id}`), 409, 'conflict');
    const gone = await adminRequest(product, 'patch', `/admin/keys/${key.body.id}`).send({ consumerId: null });
    expect(gone.status).toBe(200);
    expect(gone.body.consumerId).toBeNull();
    expect((await adminRequest(product, 'delete', `/admin/consumers/${created.id}`)).status).toBe(204);
    expectError(await adminRequest(product, 'get', `/admin/consumers/${created.id}`), 404, 'not_found');

    const audit = await adminRequest(product, 'get', '/admin/audit?limit=20');
    const actions = (audit.body.entries as Array<{ action: string; keyId: string }>)
      .filter((e) => e.keyId === created.id)
      .map((e) => e.action);
    expect(actions).toEqual(['delete', 'update', 'create']);
    const keyUpdate = (
      audit.body.entries as Array<{ action: string; keyId: string; details: Record<string, unknown> }>
    ).find((e) => e.keyId === key.body.id && e.action === 'update');
    expect(keyUpdate?.details).toEqual({ consumerId: null });
  });

  it('a revoked key does not hold its consumer', async () => {
    const consumer = await createConsumer({ name: 'Old' });
    const key = await adminRequest(product, 'post', '/admin/keys').send({
      name: 'old',
      plan: 'free',
      consumerId: consumer.id,
    });
    expect((await adminRequest(product, 'delete', `/admin/keys/${key.body.id}`)).status).toBe(204);
    expect((await adminRequest(product, 'delete', `/admin/consumers/${consumer.id}`)).status).toBe(204);
  });

  it('grants credits to a consumer month', async () => {
    const consumer = await createConsumer({ name: 'Monthly', limits: { perMonth: 100 } });
    const res = await adminRequest(product, 'post', `/admin/consumers/${consumer.id}/credits`).send({ units: 25 });
    expect(res.status).toBe(200);
    expect(res.body.usage.month).toMatchObject({ limit: 125, remaining: 125, credits: 25 });
  });

  it('refuses bad input with the Error body and stores nothing', async () => {
    const before = (await adminRequest(product, 'get', '/admin/consumers')).body.length;
    expectError(await adminRequest(product, 'post', '/admin/consumers').send({ name: '' }), 400, 'validation_failed');
    expectError(
      await adminRequest(product, 'post', '/admin/consumers').send({ name: 'x', limits: { perMinute: 0 } }),
      400,
      'validation_failed',
    );
    expectError(
      await adminRequest(product, 'post', '/admin/consumers').send({ name: 'x', limits: { perHour: 3 } }),
      400,
      'validation_failed',
    );
    expectError(
      await adminRequest(product, 'post', '/admin/consumers').send({ name: 'x', billingDay: 29 }),
      400,
      'validation_failed',
    );
    // Below the largest cost (POST /pets costs 5): no request could ever be served.
    expectError(
      await adminRequest(product, 'post', '/admin/consumers').send({ name: 'x', limits: { perMinute: 4 } }),
      400,
      'validation_failed',
    );
    expectError(
      await adminRequest(product, 'post', '/admin/consumers').set('Content-Type', 'text/plain').send('name=x'),
      415,
      'unsupported_media_type',
    );
    expect((await adminRequest(product, 'get', '/admin/consumers')).body.length).toBe(before);

    const consumer = await createConsumer({ name: 'Fine' });
    expectError(
      await adminRequest(product, 'patch', `/admin/consumers/${consumer.id}`).send({ limits: { perDay: 2 } }),
      400,
      'validation_failed',
    );
    expectError(
      await adminRequest(product, 'patch', '/admin/consumers/con_000000000000000000000000').send({ name: 'y' }),
      404,
      'not_found',
    );
    expectError(await adminRequest(product, 'delete', '/admin/consumers/nope'), 404, 'not_found');
    expectError(
      await adminRequest(product, 'post', '/admin/consumers/con_000000000000000000000000/credits').send({ units: 1 }),
      404,
      'not_found',
    );

    // An unknown consumer on a key: 400, on create and on PATCH.
    expectError(
      await adminRequest(product, 'post', '/admin/keys').send({
        name: 'k',
        plan: 'free',
        consumerId: 'con_000000000000000000000000',
      }),
      400,
      'validation_failed',
    );
    const key = await adminRequest(product, 'post', '/admin/keys').send({ name: 'k', plan: 'free' });
    expectError(
      await adminRequest(product, 'patch', `/admin/keys/${key.body.id}`).send({
        consumerId: 'con_000000000000000000000000',
      }),
      400,
      'validation_failed',
    );
    expectError(
      await adminRequest(product, 'patch', `/admin/keys/${key.body.id}`).send({ consumerId: 7 }),
      400,
      'validation_failed',
    );
    expect((await adminRequest(product, 'get', `/admin/keys/${key.body.id}`)).body.consumerId).toBeNull();
  });
});

import request from 'supertest';
import { startTestProduct } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';

/**
 * GET /admin/deprecations across instances and restarts: calls gather in memory and reach Redis
 * every few seconds, so what an instance holds when it stops must be written at shutdown, and a
 * report on another instance must see it.
 */
describe('GET /admin/deprecations', () => {
  it('keeps the calls an instance made just before it stopped, and shows them on the next one', async () => {
    const namespace = uniqueNamespace('depr-report');
    const first = await startTestProduct({ namespace });
    const { key, record } = await first.keyService.create({ name: 'still on v0', plan: 'pro' });
    for (let i = 0; i < 3; i++)
      await request(first.gatewayUrl)
        .get(`/v1/pets/${i + 1}`)
        .set('Authorization', `Bearer ${key}`);
    // A call of an operation that is not deprecated is not listed.
    await request(first.gatewayUrl).get('/v1/pets').set('Authorization', `Bearer ${key}`).expect(200);
    await first.close();

    const second = await startTestProduct({ namespace });
    try {
      const res = await request(second.adminUrl)
        .get('/admin/deprecations')
        .set('Authorization', `Bearer ${second.adminToken}`)
        .expect(200);
      expect(res.body.routes).toHaveLength(1);
      expect(res.body.routes[0]).toMatchObject({ method: 'GET', route: '/v1/pets/{petId}' });
      expect(res.body.routes[0].callers).toEqual([
        {
          keyId: record.id,
          name: 'still on v0',
          plan: 'pro',
          count: 3,
          lastCallAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        },
      ]);
    } finally {
      await second.close();
    }
  });

  it('works without Redis, in process', async () => {
    const product = await startTestProduct({ redis: false });
    try {
      const { key, record } = await product.keyService.create({ name: 'local', plan: 'free' });
      await request(product.gatewayUrl).head('/v1/pets/1').set('Authorization', `Bearer ${key}`);
      const res = await request(product.adminUrl)
        .get('/admin/deprecations')
        .set('Authorization', `Bearer ${product.adminToken}`)
        .expect(200);
      expect(res.body.routes[0].callers).toEqual([
        expect.objectContaining({ keyId: record.id, name: 'local', plan: 'free', count: 1 }),
      ]);
    } finally {
      await product.close();
    }
  });
});

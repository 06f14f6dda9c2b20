import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct } from '../../support/product-harness';
import { keyLifecycleSuite, LIFECYCLE_OVERRIDES } from './key-lifecycle-suite';

// Two instances on one real Redis namespace: A runs the inventory, B forwards to it.
keyLifecycleSuite('Redis, two instances', async (clock) => {
  const namespace = uniqueNamespace('lifecycle');
  const a = await startTestProduct({ namespace, clock, overrides: LIFECYCLE_OVERRIDES });
  const b = await startTestProduct({
    namespace,
    clock,
    overrides: { ...LIFECYCLE_OVERRIDES, upstream: { url: a.inventory!.url } },
  });
  return {
    a,
    b,
    close: async () => {
      await b.close();
      await a.close();
    },
  };
});

// The in-process store: one instance, the same behaviour.
keyLifecycleSuite('the in-process store', async (clock) => {
  const a = await startTestProduct({ redis: false, clock, overrides: LIFECYCLE_OVERRIDES });
  return { a, b: a, close: () => a.close() };
});

describe('the in-process store across a restart', () => {
  it('keeps the usage history, last use and audit trail in SQLite under DATA_DIR', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-lifecycle-'));
    const bearer = (p: { adminToken: string }) => `Bearer ${p.adminToken}`;
    const first = await startTestProduct({ redis: false, dataDir });
    let keyId: string;
    try {
      const created = await request(first.adminUrl)
        .post('/admin/keys')
        .set('Authorization', bearer(first))
        .send({ name: 'kept', plan: 'free' })
        .expect(201);
      keyId = (created.body as { id: string }).id;
      for (let i = 0; i < 3; i++)
        await request(first.gatewayUrl)
          .get('/v1/pets')
          .set('Authorization', `Bearer ${(created.body as { key: string }).key}`)
          .expect(200);
    } finally {
      // Closing flushes the tallies still in memory.
      await first.close();
    }
    const second = await startTestProduct({ redis: false, dataDir });
    try {
      const usage = await request(second.adminUrl)
        .get(`/admin/keys/${keyId}/usage?days=1`)
        .set('Authorization', bearer(second))
        .expect(200);
      expect((usage.body as { days: Array<{ admitted: number }> }).days[0]!.admitted).toBe(3);
      const shown = await request(second.adminUrl)
        .get(`/admin/keys/${keyId}`)
        .set('Authorization', bearer(second))
        .expect(200);
      expect((shown.body as { lastUsedAt: string | null }).lastUsedAt).not.toBeNull();
      const audit = await request(second.adminUrl).get('/admin/audit').set('Authorization', bearer(second)).expect(200);
      expect((audit.body as { entries: Array<{ action: string; keyId: string }> }).entries).toEqual([
        expect.objectContaining({ action: 'create', keyId }),
      ]);
    } finally {
      await second.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

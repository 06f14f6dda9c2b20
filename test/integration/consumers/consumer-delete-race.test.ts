import { ManualClock } from '../../../src/shared/clock';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { startTestProduct, type ProductHarness, type ProductHarnessOptions } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { adminRequest, gatewayGet } from '../admin/admin-kit';

/**
 * Deleting a consumer while a key is created in it (issue 48, item 3), over two instances sharing
 * one namespace: "the consumer exists" (the key's write) and "no key that is not revoked belongs to
 * it" (the delete) are decided with the write, so one of the two loses every time and no live key
 * is ever left with its consumer gone (its shared limits would stop applying).
 */

const TRIES = 30;
const CONSUMER_PER_MINUTE = 3;

/** A moment well inside a UTC minute: the shared minute of the check never straddles two. */
const MID_MINUTE = Date.UTC(2026, 2, 10, 12, 30, 15);

interface Outcome {
  consumerId: string;
  /** The status of the key's write into the consumer (POST or PATCH). */
  write: number;
  delete: number;
  key: string;
}

/** Puts a key into the consumer: a new key, or one of no consumer (made before the race) moved into it. */
interface KeyWrite {
  prepare(product: ProductHarness): Promise<{ id: string; key: string } | null>;
  write(
    product: ProductHarness,
    consumerId: string,
    prepared: { id: string; key: string } | null,
  ): Promise<{ status: number; key: string }>;
}

const createInto: KeyWrite = {
  prepare: async () => null,
  write: async (product, consumerId) => {
    const res = await adminRequest(product, 'post', '/admin/keys').send({ name: 'racing', plan: 'pro', consumerId });
    return { status: res.status, key: res.body.key };
  },
};

const moveInto: KeyWrite = {
  prepare: async (product) => {
    const res = await adminRequest(product, 'post', '/admin/keys').send({ name: 'moving', plan: 'pro' });
    expect(res.status).toBe(201);
    return { id: res.body.id, key: res.body.key };
  },
  write: async (product, consumerId, prepared) => ({
    status: (await adminRequest(product, 'patch', `/admin/keys/${prepared!.id}`).send({ consumerId })).status,
    key: prepared!.key,
  }),
};

/**
 * One race; the key's write is sent `headStartMs` after the delete, so that over the tries it
 * meets the delete at each of its steps (a delete reads the keys twice before it removes the record).
 */
async function raceOnce(
  writer: ProductHarness,
  deleter: ProductHarness,
  keyWrite: KeyWrite,
  headStartMs: number,
): Promise<Outcome> {
  const consumer = await adminRequest(deleter, 'post', '/admin/consumers').send({
    name: 'Racer',
    limits: { perMinute: CONSUMER_PER_MINUTE },
  });
  expect(consumer.status).toBe(201);
  const consumerId = consumer.body.id as string;
  const prepared = await keyWrite.prepare(writer);
  const deleting = adminRequest(deleter, 'delete', `/admin/consumers/${consumerId}`).then((res) => res);
  await new Promise((resolve) => setTimeout(resolve, headStartMs));
  const [written, deleted] = await Promise.all([keyWrite.write(writer, consumerId, prepared), deleting]);
  return { consumerId, write: written.status, delete: deleted.status, key: written.key };
}

function raceSuite(
  label: string,
  start: (clock: ManualClock) => Promise<[ProductHarness, ProductHarness, () => Promise<void>]>,
) {
  describe(label, () => {
    const clock = new ManualClock(MID_MINUTE);
    let a: ProductHarness;
    let b: ProductHarness;
    let stop: () => Promise<void>;

    beforeAll(async () => {
      [a, b, stop] = await start(clock);
    }, 120_000);
    afterAll(() => stop?.());

    it.each([
      ['POST /admin/keys', createInto, 201],
      ['PATCH /admin/keys/{id}', moveInto, 200],
    ] as const)(
      `${TRIES} races of DELETE consumer against %s into it: the write 400 and the delete 204, or the write done and the delete 409`,
      async (_label, write, done) => {
        const outcomes: Outcome[] = [];
        for (let i = 0; i < TRIES; i++)
          outcomes.push(await raceOnce(i % 2 === 0 ? a : b, i % 2 === 0 ? b : a, write, i % 6));
        const allowed = (o: Outcome) => (o.write === 400 && o.delete === 204) || (o.write === done && o.delete === 409);
        expect(outcomes.filter((o) => !allowed(o)).map((o) => ({ write: o.write, delete: o.delete }))).toEqual([]);

        // Every live key's consumer is there, and its shared limit holds for the key.
        const live = outcomes.filter((o) => o.write === done);
        for (const o of live)
          expect((await adminRequest(a, 'get', `/admin/consumers/${o.consumerId}`)).status).toBe(200);
        for (const o of live.slice(0, 2)) {
          const statuses: number[] = [];
          for (let i = 0; i < 2 * CONSUMER_PER_MINUTE; i++)
            statuses.push((await gatewayGet(i % 2 === 0 ? a : b, o.key)).status);
          expect(statuses.filter((s) => s === 200)).toHaveLength(CONSUMER_PER_MINUTE);
        }
      },
    );
  });
}

// A generous command timeout: the race is about what Redis decides, not about a slow answer sending
// an instance to its fallback on a busy two-core machine.
const redisOverrides = (namespace: string) => ({ redis: { namespace, commandTimeoutMs: 5000 } });

raceSuite('two instances on one Redis', async (clock) => {
  const namespace = uniqueNamespace('consumer-race');
  const options: ProductHarnessOptions = { namespace, clock, overrides: redisOverrides(namespace) };
  const a = await startTestProduct(options);
  const b = await startTestProduct({
    ...options,
    overrides: { ...redisOverrides(namespace), upstream: { url: a.inventory!.url } },
  });
  return [
    a,
    b,
    async () => {
      await b.close();
      await a.close();
    },
  ];
});

raceSuite('two instances on a three-master Redis Cluster', async (clock) => {
  let cluster: RedisCluster | undefined = await startRedisCluster({ masters: 3 });
  const namespace = uniqueNamespace('consumer-race-cluster');
  const env = { REDIS_CLUSTER_NODES: cluster.nodes.join(',') };
  const options: ProductHarnessOptions = { redis: false, env, namespace, clock, overrides: redisOverrides(namespace) };
  const a = await startTestProduct(options);
  const b = await startTestProduct({
    ...options,
    overrides: { ...redisOverrides(namespace), upstream: { url: a.inventory!.url } },
  });
  return [
    a,
    b,
    async () => {
      await b.close();
      await a.close();
      await cluster?.stop();
      cluster = undefined;
    },
  ];
});

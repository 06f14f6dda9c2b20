import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct } from '../../support/product-harness';
import { keyLifecycleSuite, LIFECYCLE_OVERRIDES } from './key-lifecycle-suite';

// Two instances on one real Redis namespace: A runs the inventory, B forwards to it.
keyLifecycleSuite('Redis, two instances', async (clock) => {
  const namespace = uniqueNamespace('lifecycle');
  const a = await startTestProduct({ namespace, clock, overrides: LIFECYCLE_OVERRIDES });
  const b = await startTestProduct({ namespace, clock, overrides: { ...LIFECYCLE_OVERRIDES, upstream: { url: a.inventory!.url } } });
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

import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import type { KeyStore } from '../keys';
import type { KeyLimiter } from '../limits/types';
import { ConsumerDirectory } from '../consumers/consumer-directory';
import { consumerLookup } from '../consumers/consumer-lookup';
import { ConsumerService } from '../consumers/consumer-service';
import { keyWindowMover } from '../consumers/key-moves';
import type { ConsumerStore } from '../consumers/types';
import { consumerAccessPolicy } from '../access/consumer-policy';
import type { Closers } from './closers';

export interface ConsumersDependencies {
  consumerStore: ConsumerStore;
  keyStore: KeyStore;
  keyLimiter: KeyLimiter;
  clock: Clock;
  logger: Logger;
  closers: Closers;
  costs: () => readonly { method: string; path: string; cost: number }[];
}

/**
 * Consumers (CONTRACT §4): the directory every request asks (held in process, following the
 * store's changes), the service the admin API calls, and what the key service needs of them
 * (does a consumer exist; a key moved between consumers takes its windows along).
 */
export async function startConsumers(deps: ConsumersDependencies) {
  const { logger } = deps;
  const directory = new ConsumerDirectory(deps.consumerStore, (err) =>
    logger.warn({ err: (err as Error).message }, 'could not read consumers; the directory keeps what it had'),
  );
  await directory.start();
  deps.closers.add(() => directory.close());
  const service = new ConsumerService({
    store: deps.consumerStore,
    keys: deps.keyStore,
    keyLimiter: deps.keyLimiter,
    clock: deps.clock,
    costs: deps.costs,
  });
  return {
    directory,
    service,
    lookup: consumerLookup(directory),
    /** The access policy of a key's consumer (src/access/consumer-policy.ts), from the directory. */
    accessPolicy: consumerAccessPolicy((id) => directory.get(id)),
    keyServiceHooks: {
      consumerExists: async (id: string) => (await deps.consumerStore.get(id)) !== null,
      onConsumerMoved: keyWindowMover(deps.keyLimiter, (err) =>
        logger.warn(
          { err: (err as Error).message },
          "could not move a key's windows to its new consumer a second time",
        ),
      ),
    },
  };
}

import { MemoryKeyLimiter } from '../../../src/limits/memory-key-limiter';
import { describeConsumerWindowBehaviours } from './consumer-window-behaviours';

describeConsumerWindowBehaviours('MemoryKeyLimiter', {
  create: (clock, ban, shape) => new MemoryKeyLimiter({ ban, clock, minuteWindow: shape, sweepIntervalMs: 0 }),
});

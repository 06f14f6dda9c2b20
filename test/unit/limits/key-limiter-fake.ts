import type {
  ConsumeOptions,
  ConsumerShare,
  ConsumerWindows,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  KeyUsage,
  WindowLimits,
  WindowName,
  WindowsHeld,
} from '../../../src/limits/types';

/**
 * The base of a test's fake KeyLimiter: every method of the interface, each failing loudly with its
 * name until the test overrides it (a fake that answers a step's one call need not invent the rest).
 */
export class KeyLimiterFake implements KeyLimiter {
  private unfaked(method: keyof KeyLimiter): never {
    throw new Error(`KeyLimiterFake: ${method} is not faked by this test`);
  }
  consume(_key: KeyRef, _limits: WindowLimits, _options?: ConsumeOptions): Promise<KeyDecision> {
    return this.unfaked('consume');
  }
  usage(_key: KeyRef, _limits: WindowLimits, _billingDay?: number): Promise<KeyUsage> {
    return this.unfaked('usage');
  }
  addCredits(_key: KeyRef, _units: number, _billingDay?: number): Promise<void> {
    return this.unfaked('addCredits');
  }
  unban(_key: KeyRef): Promise<void> {
    return this.unfaked('unban');
  }
  resetWindows(_key: KeyRef, _windows: readonly WindowName[], _billingDay?: number): Promise<WindowsHeld> {
    return this.unfaked('resetWindows');
  }
  resetConsumerWindows(_consumer: ConsumerShare, _windows: readonly WindowName[]): Promise<WindowsHeld> {
    return this.unfaked('resetConsumerWindows');
  }
  consumerUsage(_consumer: ConsumerShare): Promise<ConsumerWindows> {
    return this.unfaked('consumerUsage');
  }
  addConsumerCredits(_consumer: ConsumerShare, _units: number): Promise<void> {
    return this.unfaked('addConsumerCredits');
  }
  moveWindows(_from: KeyRef, _to: KeyRef): Promise<void> {
    return this.unfaked('moveWindows');
  }
  release(_key: KeyRef, _leaseId: string): void {
    this.unfaked('release');
  }
  activeBans(): Promise<number> {
    return this.unfaked('activeBans');
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Every method of a KeyLimiter as a jest mock. */
export type MockedKeyLimiter = KeyLimiter & { [M in keyof KeyLimiter]: jest.Mock };

/** A KeyLimiter of jest mocks (each answering undefined) with `overrides` in place of some. */
export function mockKeyLimiter(overrides: Partial<Record<keyof KeyLimiter, jest.Mock>> = {}): MockedKeyLimiter {
  return {
    consume: jest.fn(),
    usage: jest.fn(),
    addCredits: jest.fn(),
    unban: jest.fn(),
    resetWindows: jest.fn(),
    resetConsumerWindows: jest.fn(),
    consumerUsage: jest.fn(),
    addConsumerCredits: jest.fn(),
    moveWindows: jest.fn(),
    release: jest.fn(),
    activeBans: jest.fn(),
    close: jest.fn(),
    ...overrides,
  };
}

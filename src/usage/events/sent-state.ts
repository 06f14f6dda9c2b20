import type { OutboxEvent } from '../../notifications/outbox';
import type { SentPeriod } from './period-closing';

/**
 * What the closer has sent of one key's periods of one day, and the events it has yet to hand to
 * the outbox. Written before the outbox gets them and compared-and-set by version, so two closers
 * never send two revisions under one number, and a closer that dies between the two writes leaves
 * its events here, handed over again (same ids, same bodies) by the next one.
 */
export interface SentState {
  /** 0: nothing written yet. */
  version: number;
  periods: Map<number, SentPeriod>;
  pending: OutboxEvent[];
}

export interface SentStateStore {
  read(keyId: string, periodMs: number, day: number): Promise<SentState>;
  /** Writes `next` as version `expected + 1` if the stored version is still `expected`; false otherwise. */
  write(
    keyId: string,
    periodMs: number,
    day: number,
    expected: number,
    next: Omit<SentState, 'version'>,
  ): Promise<boolean>;
  /** Whether `owner` closes periods now (one closer at a time across instances), for `leaseMs` unless renewed. */
  lease(owner: string, now: number, leaseMs: number): Promise<boolean>;
  close(): void;
}

/** The JSON kept per key-day: periods as [start, units, admitted, refused, revisions]. */
interface StoredState {
  periods: Array<[number, number, number, number, number]>;
  pending: OutboxEvent[];
}

export function encodeState(state: Omit<SentState, 'version'>): string {
  const stored: StoredState = {
    periods: [...state.periods].map(([start, p]) => [start, p.units, p.admitted, p.refused, p.revisions]),
    pending: state.pending,
  };
  return JSON.stringify(stored);
}

export function decodeState(version: number, text: string | null): SentState {
  if (text === null) return { version: 0, periods: new Map(), pending: [] };
  const stored = JSON.parse(text) as StoredState;
  return {
    version,
    periods: new Map(
      stored.periods.map(([start, units, admitted, refused, revisions]) => [
        start,
        { units, admitted, refused, revisions },
      ]),
    ),
    pending: stored.pending,
  };
}

/** In memory: for unit tests of the closer. */
export class MemorySentStateStore implements SentStateStore {
  private readonly states = new Map<string, { version: number; text: string }>();
  private holder: { owner: string; until: number } | null = null;

  async read(keyId: string, periodMs: number, day: number): Promise<SentState> {
    const held = this.states.get(`${periodMs}:${day}:${keyId}`);
    return decodeState(held?.version ?? 0, held?.text ?? null);
  }

  async write(
    keyId: string,
    periodMs: number,
    day: number,
    expected: number,
    next: Omit<SentState, 'version'>,
  ): Promise<boolean> {
    const name = `${periodMs}:${day}:${keyId}`;
    if ((this.states.get(name)?.version ?? 0) !== expected) return false;
    this.states.set(name, { version: expected + 1, text: encodeState(next) });
    return true;
  }

  async lease(owner: string, now: number, leaseMs: number): Promise<boolean> {
    if (this.holder && this.holder.owner !== owner && this.holder.until > now) return false;
    this.holder = { owner, until: now + leaseMs };
    return true;
  }

  close(): void {}
}

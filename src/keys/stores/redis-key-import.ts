import { randomBytes } from 'node:crypto';
import { setImmediate as turnOfEventLoop, setTimeout as sleep } from 'node:timers/promises';
import { closedConsumerConflict, keepRevocations, movesOf } from './import-rules';
import type { LuaCaller } from '../../shared/redis/lua-script';
import { KeyImportConflict, type ApiKeyRecord, type ImportResult, type KeyMove } from '../types';
import { encodeRecord } from '../record-changes';

/** The Redis keys an import touches (redisKeyLayout of redis-key-store.ts). */
export interface ImportLayout {
  byHash: string;
  byId: string;
  writes: string;
  issued: string;
  channel: string;
  importJournal: (token: string) => string;
  /** A consumer's closed set (KeyStore.closeConsumer): a batch refuses a live key entering one that exists. */
  consumerClosed: (consumerId: string) => string;
}

/**
 * Records per import script. Each record costs some twenty Redis calls inside the script (reads,
 * the journal, writes, one publish per hash), so 250 hold Redis for a few milliseconds: far from
 * the command timeout (200 ms by default) and short enough that a concurrent request waits little.
 */
export const IMPORT_BATCH = 250;

/** Entries per HSCAN step or per read of records (export, listing, durable copy, undo). */
export const RECORDS_PER_READ = 500;

/**
 * How long a journal outlives its last batch. An import that ends (applied or undone) deletes it;
 * one whose process died half-way leaves it this long for an operator to see (docs/keys.md).
 */
const JOURNAL_TTL_MS = 24 * 3600 * 1000;

/** Attempts, a second apart, at undoing a failed import (Redis may have been away for a while). */
const UNDO_ATTEMPTS = 30;

/**
 * Attempts at one batch whose answer did not come (a timeout, a dropped connection): the script is
 * safe to send again (see IMPORT_BATCH_SCRIPT), and a busy Redis or host should not undo an import
 * of 100,000 records for one slow answer. A refusal (conflict) is never retried.
 */
const BATCH_ATTEMPTS = 5;

/** A script's own refusal, as opposed to an answer that did not come. */
function isRefusal(err: unknown): boolean {
  return /hash-conflict|revoked-meanwhile|consumer-closed/.test((err as Error).message ?? '');
}

/** Runs `step`, again after a short pause when its answer did not come (not when Redis refused it). */
export async function withRetries<T>(step: () => Promise<T>, attempts: number): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (isRefusal(err) || attempt >= attempts) throw err;
      await sleep(100 * attempt);
    }
  }
}

/** What the Redis store's import did, with the records as written (revocations kept) for a durable copy. */
export interface RedisImportResult extends ImportResult {
  written: ApiKeyRecord[];
}

export interface RedisImportDependencies {
  layout: ImportLayout;
  /** IMPORT_BATCH_SCRIPT and UNDO_IMPORT_SCRIPT (redis-key-recovery-scripts.ts) on the store's client. */
  importBatch: LuaCaller<[number, ...string[]]>;
  undoBatch: LuaCaller<number>;
  getMany: (ids: readonly string[]) => Promise<Map<string, ApiKeyRecord>>;
  del: (key: string) => Promise<void>;
  scanJournal: (key: string, cursor: string) => Promise<[string, string[]]>;
  newEpoch: () => string;
}

/**
 * The four script arguments of a record (import and restore, redis-key-recovery-scripts.ts): its id,
 * its JSON (the encoding of stores/key-record-fields.ts) and the hash fields of `by-hash` it lives under.
 */
export function recordScriptArgs(record: ApiKeyRecord): string[] {
  return [record.id, encodeRecord(record), record.hash, record.previousHash ?? ''];
}

/** A script's refusal as the import error the admin API answers 409 for. */
function refusalOf(err: unknown): unknown {
  const message = (err as Error).message ?? '';
  const conflict = /hash-conflict (\S+) (\S+)/.exec(message);
  if (conflict) return new KeyImportConflict(conflict[1]!, conflict[2]!);
  const revoked = /revoked-meanwhile (\S+)/.exec(message);
  if (revoked)
    return new KeyImportConflict(
      revoked[1]!,
      revoked[1]!,
      `key ${revoked[1]} was revoked while the import ran; import again`,
    );
  const closed = /consumer-closed (\S+) (\S+)/.exec(message);
  if (closed) return closedConsumerConflict(closed[1]!, closed[2]!);
  return err;
}

/**
 * An import as one action at any size (CONTRACT §4). Batch after batch, each record revoked here
 * keeps its revocation (read just before its batch; the script refuses one revoked in between),
 * and the state each record had goes into a journal in the script that changes it. When a batch
 * fails (a conflict, Redis away, a timeout) the journal puts every record back as it was, batch by
 * batch, and the error is thrown: nothing imported. The event loop turns between batches.
 */
export async function redisKeyImport(
  records: readonly ApiKeyRecord[],
  deps: RedisImportDependencies,
): Promise<RedisImportResult> {
  const journal = deps.layout.importJournal(randomBytes(8).toString('hex'));
  const { byHash, byId, writes, issued, channel } = deps.layout;
  const written: ApiKeyRecord[] = [];
  const moved: KeyMove[] = [];
  let unchanged = 0;
  try {
    for (let at = 0; at < records.length; at += IMPORT_BATCH) {
      const given = records.slice(at, at + IMPORT_BATCH);
      const current = await withRetries(() => deps.getMany(given.map((record) => record.id)), BATCH_ATTEMPTS);
      const batch = keepRevocations(given, (id) => current.get(id));
      const args = [channel, deps.newEpoch(), String(JOURNAL_TTL_MS), ...batch.flatMap(recordScriptArgs)];
      const closedSets = batch.map((record) => deps.layout.consumerClosed(record.consumerId ?? ''));
      const [same, ...ids] = await withRetries(
        () => deps.importBatch([byHash, byId, writes, issued, journal, ...closedSets], args),
        BATCH_ATTEMPTS,
      );
      unchanged += same;
      const changed = new Set(ids);
      const writtenNow = batch.filter((record) => changed.has(record.id));
      written.push(...writtenNow);
      // Against the records as read just before the batch (a move made in between by PATCH moved its own windows).
      moved.push(...movesOf(writtenNow, (id) => current.get(id)));
      await turnOfEventLoop();
    }
  } catch (err) {
    await undo(journal, deps);
    throw refusalOf(err);
  }
  await withRetries(() => deps.del(journal), BATCH_ATTEMPTS).catch(() => {});
  return { imported: written.length, unchanged, ids: written.map((record) => record.id), moved, written };
}

/** Puts back every record the journal holds; retried while Redis is away, then thrown saying what is left. */
async function undo(journal: string, deps: RedisImportDependencies): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await undoOnce(journal, deps);
      return;
    } catch (err) {
      if (attempt >= UNDO_ATTEMPTS) {
        throw new Error(
          `an import failed half-way and could not be undone (${(err as Error).message}); its journal ${journal} holds the records' former states`,
          { cause: err },
        );
      }
      await sleep(1000);
    }
  }
}

async function undoOnce(journal: string, deps: RedisImportDependencies): Promise<void> {
  const { byHash, byId, issued, channel } = deps.layout;
  let cursor = '0';
  do {
    const [next, entries] = await deps.scanJournal(journal, cursor);
    cursor = next;
    const ids = entries.filter((_, i) => i % 2 === 0);
    if (ids.length > 0) await deps.undoBatch([byHash, byId, issued, journal], [channel, deps.newEpoch(), ...ids]);
    await turnOfEventLoop();
  } while (cursor !== '0');
  await deps.del(journal);
}

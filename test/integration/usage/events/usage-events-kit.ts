import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually } from '../../../support/eventually';
import type { UsageSink } from '../../../support/usage-sink';

/**
 * The scenario of issue 53 item 3, shared by the Redis and the SQLite suites: keys in consumers,
 * traffic with costs over 10 short periods, the sink down for 3 of them and answering 500 for
 * another, an instance killed mid-period; then the sink's sums against the usage export.
 */

/** Seconds per period: a hidden test-only setting (docs/metering.md); 86400 is a multiple of it. */
export const PERIOD_SECONDS = 2;
/** Flushes land every 5 s: a period is closed 6 s after its end. */
export const GRACE_SECONDS = 6;
export const PERIODS = 10;
export const COSTS = [{ method: 'POST', path: '/pets', cost: 3 }];
export const UNITS = 'gateway.usage.units';

export function usageEventsBlock(sinkUrl: string, source: string) {
  return {
    enabled: true,
    url: sinkUrl,
    source,
    period: 'minute',
    periodSeconds: PERIOD_SECONDS,
    graceSeconds: GRACE_SECONDS,
    meters: ['units', 'requests', 'refusals'],
    headers: { 'x-sink-tenant': 'scenario' },
  };
}

/** The same as a config file for spawned instances (JSON is YAML). */
export function configFile(content: Record<string, unknown>): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-usage-events-')), 'config.yaml');
  fs.writeFileSync(file, JSON.stringify(content));
  return file;
}

export interface Admin {
  url: string;
  token: string;
}

export async function adminCall<T>(
  admin: Admin,
  method: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; body: T; text: string }> {
  const res = await fetch(`${admin.url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${admin.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* NDJSON or empty */
  }
  return { status: res.status, body: parsed as T, text };
}

export interface ScenarioKey {
  id: string;
  key: string;
  consumerId: string;
}

/** 5 consumers with a month window, 4 keys each with one too; the first key of each has a small minute limit, so some requests are refused. */
export async function createKeys(admin: Admin): Promise<{ consumers: string[]; keys: ScenarioKey[] }> {
  const consumers: string[] = [];
  const keys: ScenarioKey[] = [];
  for (let c = 0; c < 5; c++) {
    const consumer = await adminCall<{ id: string }>(admin, 'POST', '/admin/consumers', {
      name: `consumer ${c}`,
      limits: { perMonth: 1_000_000 },
    });
    expect(consumer.status).toBe(201);
    consumers.push(consumer.body.id);
    for (let k = 0; k < 4; k++) {
      const limits = { perMinute: k === 0 ? 9 : 10_000, perDay: 100_000, perMonth: 1_000_000 };
      const created = await adminCall<{ id: string; key: string }>(admin, 'POST', '/admin/keys', {
        name: `key ${c}.${k}`,
        plan: 'free',
        limits,
        consumerId: consumer.body.id,
      });
      expect(created.status).toBe(201);
      keys.push({ id: created.body.id, key: created.body.key, consumerId: consumer.body.id });
    }
  }
  return { consumers, keys };
}

/** One request; its status. POSTs cost 3 units (COSTS), GETs 1. */
export async function send(gatewayUrl: string, key: string, method: 'GET' | 'POST'): Promise<number> {
  const res = await fetch(`${gatewayUrl}/v1/pets${method === 'GET' ? '?limit=1' : ''}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: method === 'POST' ? JSON.stringify({ name: 'Rex', categoryId: 1 }) : undefined,
  });
  await res.arrayBuffer();
  return res.status;
}

/** Resolves at the next period boundary (the real clock: spawned instances keep their own). */
export async function nextPeriod(): Promise<number> {
  const ms = PERIOD_SECONDS * 1000;
  const wait = ms - (Date.now() % ms);
  await new Promise((resolve) => setTimeout(resolve, wait));
  return Date.now() - (Date.now() % ms);
}

/** The real clock decides the day and month: a run that would straddle UTC midnight waits for it first. */
export async function awayFromMidnight(): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < 120_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

export interface ExportLine {
  date: string;
  keyId: string;
  consumerId: string | null;
  admitted: number;
  units: number;
  rateLimited: number;
  banned: number;
}

export async function usageExport(admin: Admin): Promise<ExportLine[]> {
  const today = new Date().toISOString().slice(0, 10);
  const res = await adminCall<unknown>(admin, 'GET', `/admin/usage/export?from=${today}&to=${today}`);
  expect(res.status).toBe(200);
  return res.text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ExportLine);
}

/** What a key's month window has counted (GET /admin/keys/{id}). */
export async function keyMonthUsed(admin: Admin, keyId: string): Promise<number> {
  const res = await adminCall<{ usage: { month: { limit: number; remaining: number } } }>(
    admin,
    'GET',
    `/admin/keys/${keyId}`,
  );
  expect(res.status).toBe(200);
  return res.body.usage.month.limit - res.body.usage.month.remaining;
}

/** What each consumer's month window has counted (GET /admin/consumers/{id}). */
export async function monthUsed(admin: Admin, consumerId: string): Promise<number> {
  const res = await adminCall<{ usage: { month: { limit: number; remaining: number } } }>(
    admin,
    'GET',
    `/admin/consumers/${consumerId}`,
  );
  expect(res.status).toBe(200);
  return res.body.usage.month.limit - res.body.usage.month.remaining;
}

/** Where the sink's sums (after de-duplication) differ from the export per key and day, and from each consumer's month window. */
async function mismatches(
  sink: UsageSink,
  admin: Admin,
  consumers: readonly string[],
  consumerMonths: boolean,
): Promise<{ lines: ExportLine[]; differences: string[] }> {
  const lines = await usageExport(admin);
  const differences: string[] = [];
  const exported = new Map(lines.map((l) => [`${l.keyId} ${l.date}`, l]));
  const units = sink.sumsByKeyAndDay(UNITS, 'units');
  const admitted = sink.sumsByKeyAndDay('gateway.usage.requests', 'admitted');
  const refused = sink.sumsByKeyAndDay('gateway.usage.refusals', 'refused');
  for (const name of new Set([...exported.keys(), ...units.keys()])) {
    const line = exported.get(name);
    const want = {
      units: line?.units,
      admitted: line?.admitted,
      refused: line ? line.rateLimited + line.banned : undefined,
    };
    const got = { units: units.get(name), admitted: admitted.get(name), refused: refused.get(name) ?? 0 };
    if (JSON.stringify(want) !== JSON.stringify(got))
      differences.push(`${name}: export ${JSON.stringify(want)}, sink ${JSON.stringify(got)}`);
    // One day of traffic: the key's month window counted what the day did.
    const month = line ? await keyMonthUsed(admin, line.keyId) : undefined;
    if (month !== got.units) differences.push(`${name}: sink ${got.units}, key month window ${month}`);
  }
  const bySubject = sink.sumsBySubject(UNITS);
  for (const consumerId of consumers) {
    const exportedUnits = lines.filter((l) => l.consumerId === consumerId).reduce((sum, l) => sum + l.units, 0);
    const month = consumerMonths ? await monthUsed(admin, consumerId) : exportedUnits;
    const sunk = bySubject.get(consumerId) ?? 0;
    if (sunk !== exportedUnits || month !== exportedUnits)
      differences.push(`${consumerId}: sink ${sunk}, export ${exportedUnits}, month window ${month}`);
  }
  return { lines, differences };
}

/**
 * The sink's sums after de-duplication equal the export per key and day (units, admitted, refused),
 * each key's month window and (`consumerMonths`) each consumer's: waited for, as periods close
 * GRACE_SECONDS after they end.
 */
export async function expectSinkMatchesExport(
  sink: UsageSink,
  admin: Admin,
  consumers: readonly string[],
  consumerMonths = true,
): Promise<ExportLine[]> {
  let last: { lines: ExportLine[]; differences: string[] } = { lines: [], differences: ['not compared yet'] };
  await eventually(
    async () => {
      last = await mismatches(sink, admin, consumers, consumerMonths);
      return last.differences.length === 0;
    },
    {
      timeoutMs: 90_000,
      pollMs: 500,
      what: () => `sink and export agree; still differing:\n${last.differences.join('\n')}`,
    },
  );
  expect(last.differences).toEqual([]);
  expect(sink.rejected).toEqual([]);
  expect(sink.conflicts).toBe(0);
  return last.lines;
}

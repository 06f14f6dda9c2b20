import fs from 'node:fs';
import path from 'node:path';
import { generateApiKey } from '../src/keys/key-format';
import { runLoad, type LoadResult } from './load';
import type { BenchChild } from './processes';
import { difference, type RedisCommandStats } from './redis-stats';

/**
 * `npm run bench -- --flood`: made-up keys of the right shape (`asg_dev_` and 32 random letters and
 * digits, a fresh one per request) from one address against the Redis gateway, as in issue 34.
 * Three phases of the same length: the legitimate key alone, the flood alone, both together.
 * Writes bench/results/flood.json.
 */

export interface FloodSettings {
  durationSeconds: number;
  /** Connections of the flood; the legitimate client keeps 8. */
  connections: number;
}

interface Phase {
  load: LoadResult;
  redisCommands: number;
  byCommand: Record<string, number>;
  gatewayCpuMs: number;
}

const LEGITIMATE_CONNECTIONS = 8;

async function phase(
  gateway: BenchChild,
  stats: RedisCommandStats,
  loads: () => Promise<LoadResult[]>,
): Promise<Phase[]> {
  const before = await stats.snapshot();
  const cpuBefore = gateway.cpuMs();
  const results = await loads();
  const cpuMs = gateway.cpuMs() - cpuBefore;
  const byCommand = difference(await stats.snapshot(), before);
  const commands = Object.values(byCommand).reduce((sum, n) => sum + n, 0);
  // Commands and CPU belong to the phase; each load gets them when it runs alone.
  return results.map((load) => ({ load, redisCommands: commands, byCommand, gatewayCpuMs: cpuMs }));
}

export async function floodGateway(
  settings: FloodSettings,
  gateway: BenchChild,
  stats: RedisCommandStats,
  resultFile: string,
): Promise<void> {
  const url = `${gateway.url}/v1/pets`;
  const legitimate = {
    url,
    connections: LEGITIMATE_CONNECTIONS,
    durationSeconds: settings.durationSeconds,
    headers: { authorization: `Bearer ${gateway.details.admitted}` },
  };
  const flood = {
    url,
    connections: settings.connections,
    durationSeconds: settings.durationSeconds,
    headersPerRequest: () => ({ authorization: `Bearer ${generateApiKey('asg_dev_')}` }),
  };
  process.stdout.write(
    `flood: ${settings.connections} connections of made-up keys, ${LEGITIMATE_CONNECTIONS} of a legitimate key, ${settings.durationSeconds} s a phase\n`,
  );

  const [alone] = await phase(gateway, stats, async () => [await runLoad(legitimate)]);
  const [floodAlone] = await phase(gateway, stats, async () => [await runLoad(flood)]);
  const [floodBoth, legitimateBoth] = await phase(gateway, stats, () =>
    Promise.all([runLoad(flood), runLoad(legitimate)]),
  );

  const perRequest = (value: number, requests: number) => (requests > 0 ? value / requests : 0);
  const result = {
    floodRequests: floodAlone!.load.requests,
    floodRequestsPerSecond: floodAlone!.load.requestsPerSecond,
    floodStatuses: floodAlone!.load.statuses,
    floodP99Ms: floodAlone!.load.p99Ms,
    redisCommandsPerFloodRequest: perRequest(floodAlone!.redisCommands, floodAlone!.load.requests),
    redisCommandsOfFlood: floodAlone!.byCommand,
    gatewayCpuMsPerFloodRequest: perRequest(floodAlone!.gatewayCpuMs, floodAlone!.load.requests),
    legitimateP99MsAlone: alone!.load.p99Ms,
    legitimateP99MsDuringFlood: legitimateBoth!.load.p99Ms,
    legitimateRequestsPerSecondDuringFlood: legitimateBoth!.load.requestsPerSecond,
    legitimateStatusesDuringFlood: legitimateBoth!.load.statuses,
    floodRequestsDuringBoth: floodBoth!.load.requests,
    finishedAt: new Date().toISOString(),
  };
  fs.mkdirSync(path.dirname(resultFile), { recursive: true });
  fs.writeFileSync(resultFile, JSON.stringify(result, null, 2) + '\n');
  process.stdout.write(
    `made-up keys alone: ${result.floodRequests} requests (${result.floodRequestsPerSecond.toFixed(0)}/s, ${JSON.stringify(result.floodStatuses)}), ` +
      `${result.redisCommandsPerFloodRequest.toFixed(4)} Redis commands and ${(result.gatewayCpuMsPerFloodRequest * 1000).toFixed(0)} µs of gateway CPU per request\n` +
      `legitimate key p99: ${result.legitimateP99MsAlone.toFixed(1)} ms alone, ${result.legitimateP99MsDuringFlood.toFixed(1)} ms during the flood ` +
      `(${JSON.stringify(result.legitimateStatusesDuringFlood)}). Wrote ${resultFile}\n`,
  );
}

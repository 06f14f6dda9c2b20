import {
  judgeRatio,
  median,
  pairedRatios,
  pairedRatioTarget,
  spreadPercent,
  verdictText,
} from '../../../bench/verdict';
import { checkTargets, type BenchReport, type VariantSummary } from '../../../bench/report';

describe("spreadPercent: (max − min) ÷ median of a row's rounds", () => {
  it('is the range over the median, in percent', () => {
    expect(spreadPercent([100, 110, 90])).toBeCloseTo(20, 10);
    expect(spreadPercent([300, 330])).toBeCloseTo((30 / 315) * 100, 10);
  });

  it('is 0 for rounds that agree, and NaN for a single round (no spread to judge by)', () => {
    expect(spreadPercent([250, 250, 250])).toBe(0);
    expect(spreadPercent([250])).toBeNaN();
  });

  it('takes the median of an even count as the mean of the middle two', () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });
});

describe('judgeRatio: holds, missed, or undecided when the rows scatter more than the margin', () => {
  it('holds within the margin when the spreads are narrower than it', () => {
    expect(judgeRatio({ ratio: 1.03, limit: 1.05, spreadsPercent: [2, 4] })).toEqual({
      verdict: 'holds',
      spreadPercent: 4,
      marginPercent: 5,
    });
  });

  it('is missed past the limit when the spreads are narrower than the margin', () => {
    expect(judgeRatio({ ratio: 1.08, limit: 1.05, spreadsPercent: [3, 1] }).verdict).toBe('missed');
  });

  it('is undecided when the widest spread of the rows compared exceeds the margin, whichever side the ratio fell', () => {
    for (const ratio of [0.98, 1.2]) {
      expect(judgeRatio({ ratio, limit: 1.05, spreadsPercent: [2, 7.5] })).toEqual({
        verdict: 'undecided',
        spreadPercent: 7.5,
        marginPercent: 5,
      });
    }
  });

  it('decides when the spread equals the margin', () => {
    expect(judgeRatio({ ratio: 1.04, limit: 1.05, spreadsPercent: [5] }).verdict).toBe('holds');
  });

  it('takes |limit − 1| as the margin of a target below parity (≤ 0.90×: 10 %)', () => {
    expect(judgeRatio({ ratio: 0.85, limit: 0.9, spreadsPercent: [9] })).toEqual({
      verdict: 'holds',
      spreadPercent: 9,
      marginPercent: 10,
    });
    expect(judgeRatio({ ratio: 0.95, limit: 0.9, spreadsPercent: [9] }).verdict).toBe('missed');
    expect(judgeRatio({ ratio: 0.85, limit: 0.9, spreadsPercent: [11] }).verdict).toBe('undecided');
  });

  it('uses a margin given by the target ("cheaper than": the distance measured)', () => {
    expect(judgeRatio({ ratio: 0.6, limit: 1, spreadsPercent: [12], marginPercent: 40 }).verdict).toBe('holds');
    expect(judgeRatio({ ratio: 0.97, limit: 1, spreadsPercent: [12], marginPercent: 3 }).verdict).toBe('undecided');
  });

  it('is undecided on a single round, whatever the ratio', () => {
    const judgement = judgeRatio({ ratio: 1.0, limit: 1.05, spreadsPercent: [spreadPercent([300]), 2] });
    expect(judgement.verdict).toBe('undecided');
    expect(verdictText(judgement)).toBe('undecided (one round: no spread to judge by)');
  });

  it('is undecided without a CPU figure', () => {
    const judgement = judgeRatio({ ratio: NaN, limit: 1.05, spreadsPercent: [1] });
    expect(judgement.verdict).toBe('undecided');
    expect(verdictText(judgement)).toBe('undecided (no CPU figure)');
  });
});

describe('verdictText', () => {
  it('says holds or missed as such, and why a verdict is undecided', () => {
    expect(verdictText({ verdict: 'holds', spreadPercent: 1, marginPercent: 5 })).toBe('holds');
    expect(verdictText({ verdict: 'missed', spreadPercent: 1, marginPercent: 5 })).toBe('missed');
    expect(verdictText({ verdict: 'undecided', spreadPercent: 7.25, marginPercent: 5 })).toBe(
      'undecided (spread 7.3 % > margin 5.0 %)',
    );
  });
});

describe('checkTargets: the new rows of issue 41 beside the plain key', () => {
  const row = (id: string, cpuPerRound: number[], roundTrips = 1, roundTripsOverReceived = false): VariantSummary => {
    const sorted = [...cpuPerRound].sort((a, b) => a - b);
    return {
      id,
      label: id,
      requestsPerSecond: 1000,
      p50Ms: 1,
      p99Ms: 2,
      ratioToBaseline: 1,
      ratioToNginx: null,
      rounds: cpuPerRound.map((cpu) => ({
        requestsPerSecond: 1000,
        p50Ms: 1,
        p99Ms: 2,
        requests: 1000,
        serverCpuMicrosPerRequest: cpu,
      })),
      requests: 1000 * cpuPerRound.length,
      serverCpuMicrosPerRequest: median(cpuPerRound),
      cpuSpreadPercent: spreadPercent(sorted),
      redisCpuMicrosPerRequest: 20,
      expectedStatus: 200,
      unexpectedResponses: 0,
      redis: {
        commandsPerRequest: 4,
        roundTripsPerRequest: roundTrips,
        roundTripsOverReceived,
        keyLookupsPerRequest: 0,
        byCommand: {},
      },
    };
  };
  const report = (variants: VariantSummary[], fairQueueIdle: BenchReport['fairQueueIdle'] = null): BenchReport => ({
    startedAt: '',
    finishedAt: '',
    settings: { rounds: 3, durationSeconds: 4, warmupSeconds: 1, connections: 32, quick: false, client: 'wrk' },
    machine: { nproc: 2, cpuModel: '', memoryGiB: 4, node: '', platform: '' },
    loadAverage: { before: [0, 0, 0], after: [0, 0, 0] },
    baseline: 'bare-http-proxy',
    variants,
    rss: {},
    soak: null,
    fairQueueIdle,
  });
  const line = (checks: ReturnType<typeof checkTargets>, start: string) =>
    checks.find((c) => c.target.startsWith(start))!;

  it('judges each new row within its margin of the plain row, and the consumer on one round trip', () => {
    const checks = checkTargets(
      report([
        row('gateway-redis-undici', [300, 303, 306]),
        row('gateway-redis-undici-allowlist-100', [320, 322, 324]),
        row('gateway-redis-undici-consumer-1', [320, 322, 324], 1.5),
      ]),
    );
    expect(line(checks, 'gateway-redis-undici-allowlist-100 within 5 %').says).toBe('missed');
    expect(line(checks, 'gateway-redis-undici-consumer-1 within 10 %').says).toBe('holds');
    expect(line(checks, 'gateway-redis-undici-consumer-1: ≤ 1 Redis round trip').says).toBe('missed');
  });

  it('reads a round trip count as one when the excess is the requests cut off at the ends of the rounds', () => {
    // 3 rounds of 32 connections over 3,000 requests: up to 96 requests sent but not counted by wrk.
    const checks = checkTargets(
      report([
        row('gateway-redis-undici', [300, 303, 306], 1.03),
        row('gateway-redis-undici-consumer-100', [300, 303, 306], 1.04),
      ]),
    );
    expect(line(checks, 'gateway-redis-undici: ≤ 1 Redis round trip').says).toBe('holds');
    expect(line(checks, 'gateway-redis-undici-consumer-100: ≤ 1 Redis round trip').says).toBe('missed');
  });

  it("allows only the timers' few commands when the server counted its requests itself", () => {
    const checks = checkTargets(
      report([
        row('gateway-redis-undici', [300, 303, 306], 1.001, true),
        row('gateway-redis-undici-consumer-1', [300, 303, 306], 1.01, true),
      ]),
    );
    expect(line(checks, 'gateway-redis-undici: ≤ 1 Redis round trip').says).toBe('holds');
    expect(line(checks, 'gateway-redis-undici-consumer-1: ≤ 1 Redis round trip').says).toBe('missed');
  });

  it('says undecided, with the spread and the margin, when the rounds paired scatter more than the margin', () => {
    const checks = checkTargets(
      report([
        row('gateway-redis-undici', [280, 303, 330]),
        row('gateway-redis-undici-max-in-flight', [300, 301, 302], 2),
      ]),
    );
    const cpu = line(checks, 'gateway-redis-undici-max-in-flight within 5 %');
    expect(cpu.verdict).toBe('undecided');
    // Per round 300/280, 301/303, 302/330: (1.0714 − 0.9152) ÷ 0.9934.
    const ratios = [300 / 280, 301 / 303, 302 / 330];
    expect(cpu.says).toBe(
      `undecided (spread ${(((ratios[0]! - ratios[2]!) / ratios[1]!) * 100).toFixed(1)} % > margin 5.0 %)`,
    );
  });

  it('decides on the rounds paired when both rows drift alike over the run', () => {
    // Each row moves 40 % over the run (undecided on their own spreads); round by round the row stays 1.204-1.207× the plain one.
    const checks = checkTargets(
      report([
        row('gateway-redis-undici', [200, 250, 280]),
        row('gateway-redis-undici-allowlist-100', [241, 301, 338]),
      ]),
    );
    const cpu = line(checks, 'gateway-redis-undici-allowlist-100 within 5 %');
    expect(cpu.says).toBe('missed');
    expect(cpu.figures).toMatch(/^1\.21× paired by round \(1\.21 1\.20 1\.21\)/);
  });

  it('judges the fair queue idle as a share of the plain row', () => {
    const checks = checkTargets(
      report([row('gateway-redis-undici', [300, 303, 306])], {
        inFlight: 32,
        manyKeys: 100,
        oneKeyMicros: [0.1, 0.11, 0.12],
        manyKeysMicros: [30, 31, 32],
      }),
    );
    expect(line(checks, 'fair queue idle (one key').says).toBe('holds');
    expect(line(checks, 'fair queue idle (100 keys').says).toBe('missed');
  });
});

describe('pairedRatios and pairedRatioTarget: a row judged against its reference round by round', () => {
  it('divides each round by the same round of the reference, leaving out rounds either lacks', () => {
    expect(pairedRatios([110, 220, NaN, 330], [100, 200, 300])).toEqual([1.1, 1.1]);
    expect(pairedRatios([110], [])).toEqual([]);
  });

  it('takes the median and the spread of the paired ratios; with fewer than two, the fallback', () => {
    const fallback = { ratio: 1.5, limit: 1.05, spreadsPercent: [40, 30] };
    expect(pairedRatioTarget([100, 210, 330], [100, 200, 300], fallback)).toEqual({
      ratio: 1.05,
      limit: 1.05,
      spreadsPercent: [spreadPercent([1, 1.05, 1.1])],
    });
    expect(pairedRatioTarget([100], [100], fallback)).toBe(fallback);
  });
});

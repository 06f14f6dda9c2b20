import autocannon from 'autocannon';

export interface LoadSettings {
  url: string;
  connections: number;
  durationSeconds: number;
  /** A number of requests instead of a duration (soak runs). */
  amount?: number;
  headers?: Record<string, string>;
  /** Headers made anew for every request (a fresh made-up key each time: `--flood`). */
  headersPerRequest?: () => Record<string, string>;
  /** Bearer keys used one after another, request by request (the round-robin rows). */
  roundRobinKeys?: string[];
  /** A request unanswered this long is an error (10 s unless said; --instructions waits longer on servers under valgrind). */
  timeoutSeconds?: number;
  /** Requests per second over all connections (autocannon's overallRate); unset: as fast as the server answers. */
  overallRate?: number;
}

export interface LoadResult {
  /** Responses received. */
  requests: number;
  /** Requests sent, those cut off by the end of the run included (what the server saw). */
  sent: number;
  durationSeconds: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses by status code. */
  statuses: Record<string, number>;
  errors: number;
}

/** The q-quantile of sorted values (nearest rank). */
function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

/**
 * One autocannon run, keep-alive connections, no pipelining. Latencies are taken from every
 * response (autocannon's own histogram keeps whole milliseconds only), refusals included.
 */
export async function runLoad(settings: LoadSettings): Promise<LoadResult> {
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const startedAt = process.hrtime.bigint();
  const instance = autocannon({
    url: settings.url,
    connections: settings.connections,
    ...(settings.amount ? { amount: settings.amount } : { duration: settings.durationSeconds }),
    pipelining: 1,
    timeout: settings.timeoutSeconds ?? 10,
    ...(settings.overallRate ? { overallRate: settings.overallRate } : {}),
    headers: settings.headers ?? {},
    ...(settings.headersPerRequest
      ? {
          requests: [
            {
              setupRequest: (request) => ({
                ...request,
                headers: { ...request.headers, ...settings.headersPerRequest!() },
              }),
            },
          ],
        }
      : {}),
  });
  instance.on('response', (_client, _status, _bytes, responseTime) => {
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[count++] = responseTime;
  });
  const result = await instance;
  const durationSeconds = Number(process.hrtime.bigint() - startedAt) / 1e9;
  const sorted = latencies.subarray(0, count).sort();
  const statuses: Record<string, number> = {};
  for (const [code, { count: n }] of Object.entries(result.statusCodeStats)) statuses[code] = n;
  return {
    requests: count,
    sent: result.requests.sent ?? count,
    durationSeconds,
    requestsPerSecond: count / durationSeconds,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    statuses,
    errors: result.errors + result.timeouts,
  };
}

/** One series of a Prometheus text scrape: its metric name, its labels and its value. */
export interface Series {
  /** `name{labels}`, labels as the scrape spelled them: equal ids, equal series. */
  id: string;
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * The runtime's own metrics (prom-client's defaults): their series come and go with the process
 * (a kind of GC that has run, a kind of handle open now), whatever clients send, so a count of the
 * series clients could create leaves them out.
 */
const RUNTIME_METRIC = /^(process_|nodejs_)/;

/** Every series of the product's own metrics in a scrape (histogram buckets, sums and counts each one). */
export function seriesOf(text: string): Series[] {
  const series: Series[] = [];
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line);
    if (!match || RUNTIME_METRIC.test(match[1]!)) continue;
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[pair[1]!] = pair[2]!;
    series.push({ id: `${match[1]}${match[2] ?? ''}`, name: match[1]!, labels, value: Number(match[3]) });
  }
  return series;
}

import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * Request-path metrics kept as plain numbers and handed to prom-client at scrape time (issue 41).
 *
 * prom-client's `inc(labels)` and `observe(labels, v)` validate the label object, sort its names and
 * build a hash string on every call; with the label allowlist in front (metric-labels.ts) each call
 * also checks every value against its set. On the request path that is four such calls per
 * request. Here a request finds its cell with one Map lookup per label value (values already known
 * to be in their set), adds to plain numbers, and the metric's `collect()` hands the totals to
 * prom-client when /metrics is read. What /metrics shows is unchanged: the same series, in the order
 * they first occurred (a series is made in prom-client when its cell is), with the same values.
 */

/** What closes a label value to its set (LabelAllowlist, metric-labels.ts), and tells when the sets change (a reload). */
export interface LabelCloser {
  value(label: string, value: string): string;
  /** Changes identity whenever the sets change. */
  generation(): unknown;
}

/** Tallies by the metric they feed, so that enforceLabelAllowlist can give them the allowlist. */
const talliesByMetric = new WeakMap<object, LabelTally<unknown>>();

/** The tally feeding `metric`, if it has one. */
export function tallyOf(metric: object): { closeWith(closer: LabelCloser): void } | undefined {
  return talliesByMetric.get(metric);
}

type LabelsOf<L extends string> = Record<L, string>;

/** prom-client's key for a series (its util.hashObject): `name:value` pairs, names sorted, joined by commas. */
function seriesKey(labels: Record<string, string>): string {
  return Object.keys(labels)
    .sort()
    .map((name) => `${name}:${labels[name]}`)
    .join(',');
}

/**
 * Label value tuple → cell, with one Map per label position. Only values inside their label's set
 * are ever indexed (a value outside it takes the slow path, closing it each time), so what a client
 * sends cannot grow the index. The index is made again after a reload changes the sets; the cells,
 * keyed by their closed labels, stay.
 */
abstract class LabelTally<C> {
  private index = new Map<string, unknown>();
  private indexedFor: unknown = null;
  private closer: LabelCloser | null = null;
  /** Cells by prom-client's series key, in the order their series were made. */
  protected readonly cells = new Map<string, C>();

  constructor(
    protected readonly labelNames: readonly string[],
    metric: object,
  ) {
    talliesByMetric.set(metric, this);
  }

  closeWith(closer: LabelCloser): void {
    this.closer = closer;
  }

  protected cellFor(values: readonly string[]): C {
    if (this.closer !== null) {
      const generation = this.closer.generation();
      if (generation !== this.indexedFor) {
        this.index = new Map();
        this.indexedFor = generation;
      }
    }
    let node: Map<string, unknown> | undefined = this.index;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      node = node.get(values[i]!) as Map<string, unknown> | undefined;
      if (node === undefined) return this.slowCellFor(values);
    }
    return (node.get(values[last]!) as C | undefined) ?? this.slowCellFor(values);
  }

  /** A tuple not indexed yet: closes each value, finds or makes the cell, and indexes the tuple if every value was in its set. */
  private slowCellFor(values: readonly string[]): C {
    const labels: Record<string, string> = {};
    let inSets = true;
    this.labelNames.forEach((name, i) => {
      const closed = this.closer ? this.closer.value(name, values[i]!) : values[i]!;
      if (closed !== values[i]) inSets = false;
      labels[name] = closed;
    });
    const key = seriesKey(labels);
    let cell = this.cells.get(key);
    if (cell === undefined) {
      cell = this.newCell(labels, key);
      this.cells.set(key, cell);
    }
    if (inSets) this.indexTuple(values, cell);
    return cell;
  }

  private indexTuple(values: readonly string[], cell: C): void {
    let node = this.index;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = node.get(values[i]!) as Map<string, unknown> | undefined;
      if (next === undefined) node.set(values[i]!, (next = new Map()));
      node = next;
    }
    node.set(values[last]!, cell);
  }

  protected abstract newCell(labels: Record<string, string>, key: string): C;
}

interface CounterCell<L extends string> {
  labels: LabelsOf<L>;
  pending: number;
}

export interface TalliedMetricOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  registers: Registry[];
}

/** A Counter whose request-path increments are plain additions, added to the Counter at each scrape. */
export class CounterTally<L extends string> extends LabelTally<CounterCell<L>> {
  readonly metric: Counter<L>;

  constructor(options: TalliedMetricOptions<L>) {
    const tally = { flush: (_: Counter<L>) => {} };
    const metric = new Counter<L>({
      ...options,
      collect() {
        tally.flush(this);
      },
    });
    super(options.labelNames, metric);
    this.metric = metric;
    tally.flush = (counter) => this.flushInto(counter);
  }

  /** Adds `amount` (1 by default) to the series of these label values, in labelNames order. */
  add(values: readonly string[], amount = 1): void {
    this.cellFor(values).pending += amount;
  }

  protected newCell(labels: Record<string, string>): CounterCell<L> {
    const cell = { labels: labels as LabelsOf<L>, pending: 0 };
    // The series exists from its first request, as with inc(): /metrics lists series in that order.
    this.metric.inc(cell.labels, 0);
    return cell;
  }

  private flushInto(counter: Counter<L>): void {
    for (const cell of this.cells.values()) {
      if (cell.pending === 0) continue;
      counter.inc(cell.labels, cell.pending);
      cell.pending = 0;
    }
  }
}

/** prom-client's record of one histogram series, as its export reads it (histogram.js createBaseValues). */
interface HistogramSeries {
  labels: Record<string, string>;
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}

interface HistogramCell {
  key: string;
  series: HistogramSeries;
  /** Observations by bucket (index into the bounds), beyond the last bound not counted in any. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * A Histogram whose observations are a bucket search and three additions, written into the
 * Histogram at each scrape. prom-client offers no public way to set a series (only observe), so the
 * scrape writes its record (`hashMap[key]`, shaped as prom-client makes it): the sum is the same
 * running sum, added in the same order, as observe() keeps. test/unit/shared/metrics/metric-tally.test.ts
 * compares the export with prom-client's own observe(), so a prom-client that changes that shape fails there.
 */
export class HistogramTally<L extends string> extends LabelTally<HistogramCell> {
  readonly metric: Histogram<L>;
  private readonly bounds: readonly number[];

  constructor(options: TalliedMetricOptions<L> & { buckets: number[] }) {
    const tally = { flush: (_: Histogram<L>) => {} };
    const metric = new Histogram<L>({
      ...options,
      collect() {
        tally.flush(this);
      },
    });
    super(options.labelNames, metric);
    this.metric = metric;
    this.bounds = [...options.buckets].sort((a, b) => a - b);
    tally.flush = (histogram) => this.flushInto(histogram);
  }

  /** Observes `value` for these label values, in labelNames order. */
  observe(values: readonly string[], value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const cell = this.cellFor(values);
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        cell.buckets[i]! += 1;
        break;
      }
    }
    cell.sum += value;
    cell.count += 1;
  }

  protected newCell(labels: Record<string, string>, key: string): HistogramCell {
    const bucketValues: Record<number, number> = {};
    for (const bound of this.bounds) bucketValues[bound] = 0;
    const cell: HistogramCell = {
      key,
      series: { labels, bucketValues, sum: 0, count: 0 },
      buckets: new Float64Array(this.bounds.length),
      sum: 0,
      count: 0,
    };
    // The series exists from its first observation, as with observe(): /metrics lists series in that order.
    hashMapOf(this.metric)[key] = cell.series;
    return cell;
  }

  private flushInto(histogram: Histogram<L>): void {
    const hashMap = hashMapOf(histogram);
    for (const cell of this.cells.values()) {
      const { series } = cell;
      this.bounds.forEach((bound, i) => (series.bucketValues[bound] = cell.buckets[i]!));
      series.sum = cell.sum;
      series.count = cell.count;
      // Again after a reset() of the metric.
      hashMap[cell.key] = series;
    }
  }
}

function hashMapOf(histogram: Histogram<string>): Record<string, HistogramSeries> {
  return (histogram as unknown as { hashMap: Record<string, HistogramSeries> }).hashMap;
}

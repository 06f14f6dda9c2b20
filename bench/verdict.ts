/**
 * How the bench judges a target on a busy machine (issue 41, docs/benchmark.md "Spread and
 * verdicts"): a row's rounds scatter with whatever else shares the cores, so a target whose margin
 * is narrower than that scatter is neither met nor missed by this run. Pure: unit-tested in
 * test/unit/bench/verdict.test.ts.
 */

export type Verdict = 'holds' | 'missed' | 'undecided';

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * The spread of a row's rounds: (max − min) ÷ median, in percent. With the 3 to 5 rounds a run
 * affords, a range says more than an interquartile range (which needs more rounds to mean
 * anything), and it is the cautious choice: one drifted round widens it. One round: NaN (no
 * spread to judge by: a target on it is undecided).
 */
export function spreadPercent(values: readonly number[]): number {
  if (values.length < 2) return NaN;
  const mid = median(values);
  if (!(mid > 0)) return Infinity;
  return ((Math.max(...values) - Math.min(...values)) / mid) * 100;
}

/** A target of the shape "row ÷ reference ≤ limit", CPU per request of two rows of one run. */
export interface RatioTarget {
  /** The row's median CPU per request ÷ the reference row's. */
  ratio: number;
  /** The largest ratio that meets the target (0.90 for "≤ 0.90×", 1.05 for "within 5 %"). */
  limit: number;
  /** The spread (spreadPercent) of each row the target compares. */
  spreadsPercent: readonly number[];
  /**
   * How far the target lets the two rows differ, in percent: |limit − 1| by default (5 for
   * "within 5 %", 10 for "≤ 0.90×"). A target with no margin of its own ("cheaper than", limit 1)
   * gives the distance the run measured, |ratio − 1|: the rows must differ by more than their spread.
   */
  marginPercent?: number;
}

export interface Judgement {
  verdict: Verdict;
  /** The widest spread among the rows compared, in percent; NaN when one of them ran a single round, Infinity without a figure. */
  spreadPercent: number;
  marginPercent: number;
}

/** holds / missed, or undecided when the rows compared scatter more than the target's margin. */
export function judgeRatio(target: RatioTarget): Judgement {
  // Rounded to a millionth of a point: 1.05 − 1 is 0.050000000000000044 in binary floating point.
  const marginPercent = Math.round((target.marginPercent ?? Math.abs(target.limit - 1) * 100) * 1e6) / 1e6;
  const spread = target.spreadsPercent.length === 0 ? 0 : Math.max(...target.spreadsPercent);
  if (!Number.isFinite(target.ratio)) return { verdict: 'undecided', spreadPercent: Infinity, marginPercent };
  // Math.max is NaN when any spread is: a single round says nothing of the machine's drift.
  if (Number.isNaN(spread) || spread > marginPercent)
    return { verdict: 'undecided', spreadPercent: spread, marginPercent };
  return { verdict: target.ratio <= target.limit ? 'holds' : 'missed', spreadPercent: spread, marginPercent };
}

/** What a target line says: `holds`, `missed`, or `undecided (spread 7.2 % > margin 5.0 %)`. */
export function verdictText(judgement: Judgement): string {
  if (judgement.verdict !== 'undecided') return judgement.verdict;
  if (Number.isNaN(judgement.spreadPercent)) return 'undecided (one round: no spread to judge by)';
  if (!Number.isFinite(judgement.spreadPercent)) return 'undecided (no CPU figure)';
  return `undecided (spread ${judgement.spreadPercent.toFixed(1)} % > margin ${judgement.marginPercent.toFixed(1)} %)`;
}

/**
 * Each round's figure of a row divided by the reference row's figure in the same round: the machine
 * drifts over a run (one row's rounds moved 26-91 % on a quiet machine), and two rows measured in
 * one round meet more nearly the same machine than their medians do. Rounds where either row has
 * no figure are left out.
 */
export function pairedRatios(rowRounds: readonly number[], referenceRounds: readonly number[]): number[] {
  const ratios: number[] = [];
  for (let round = 0; round < Math.min(rowRounds.length, referenceRounds.length); round++) {
    const ratio = rowRounds[round]! / referenceRounds[round]!;
    if (Number.isFinite(ratio) && ratio > 0) ratios.push(ratio);
  }
  return ratios;
}

/**
 * A ratio target judged on the rounds paired: the ratio is the median of the per-round ratios, and
 * its spread theirs. With fewer than two paired rounds, the rows' medians and spreads as before.
 */
export function pairedRatioTarget(
  rowRounds: readonly number[],
  referenceRounds: readonly number[],
  fallback: RatioTarget,
): RatioTarget {
  const ratios = pairedRatios(rowRounds, referenceRounds);
  if (ratios.length < 2) return fallback;
  return { ...fallback, ratio: median(ratios), spreadsPercent: [spreadPercent(ratios)] };
}

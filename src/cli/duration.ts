const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/**
 * `90s`, `15m`, `12h`, `30d`, `2w` (or a bare number of seconds) as whole seconds; null when the text
 * is not such a duration.
 */
export function parseDurationSeconds(text: string): number | null {
  const match = /^(\d{1,9})([smhdw]?)$/.exec(text.trim());
  if (!match) return null;
  return Number(match[1]) * UNIT_SECONDS[match[2] || 's']!;
}

type KeyView = Record<string, unknown>;

function limitsText(limits: unknown): string {
  const l = limits as { perMinute?: number; perDay?: number } | null;
  return l ? `${l.perMinute}/min, ${l.perDay}/day` : '-';
}

/** A fixed-width table: one row a key, never the key itself. */
export function formatKeyTable(keys: KeyView[]): string {
  if (keys.length === 0) return 'no keys';
  const header = ['ID', 'NAME', 'PLAN', 'LIMITS', 'CREATED', 'REVOKED'];
  const rows = keys.map((k) => [
    String(k.id),
    String(k.name),
    String(k.plan),
    limitsText(k.limits),
    String(k.createdAt),
    k.revokedAt ? String(k.revokedAt) : '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

/** One key as `field: value` lines, with usage when the admin API gave it. */
export function formatKey(k: KeyView): string {
  const lines = [
    `id:         ${k.id}`,
    `name:       ${k.name}`,
    `plan:       ${k.plan}`,
    `limits:     ${limitsText(k.limits)}`,
    `created:    ${k.createdAt}`,
  ];
  if ('revokedAt' in k) lines.push(`revoked:    ${k.revokedAt ?? '-'}`);
  const usage = k.usage as Record<string, { limit: number; remaining: number; reset: number }> | undefined;
  if (usage) {
    for (const window of ['minute', 'day']) {
      const w = usage[window];
      if (w) lines.push(`${(window + ':').padEnd(11)} ${w.remaining} of ${w.limit} left, resets ${new Date(w.reset * 1000).toISOString()}`);
    }
  }
  if ('bannedUntil' in k) lines.push(`banned:     ${k.bannedUntil ? `until ${k.bannedUntil}` : 'no'}`);
  return lines.join('\n');
}

type KeyView = Record<string, unknown>;

function limitsText(limits: unknown): string {
  const l = limits as {
    perMinute?: number;
    perDay?: number;
    perMonth?: number;
    maxInFlight?: number;
    hiddenWindows?: string[];
  } | null;
  if (!l) return '-';
  const hidden =
    l.hiddenWindows === undefined ? '' : `, hidden: ${l.hiddenWindows.length > 0 ? l.hiddenWindows.join(',') : 'none'}`;
  return `${l.perMinute}/min, ${l.perDay}/day${l.perMonth === undefined ? '' : `, ${l.perMonth}/month`}${l.maxInFlight === undefined ? '' : `, ${l.maxInFlight} at once`}${hidden}`;
}

/** A fixed-width table: one row a key, never the key itself. */
export function formatKeyTable(keys: KeyView[]): string {
  if (keys.length === 0) return 'no keys';
  const header = ['ID', 'NAME', 'PLAN', 'LIMITS', 'CREATED', 'REVOKED', 'EXPIRES', 'LAST USED'];
  const rows = keys.map((k) => [
    String(k.id),
    String(k.name),
    String(k.plan),
    limitsText(k.limits),
    String(k.createdAt),
    k.revokedAt ? String(k.revokedAt) : '-',
    k.expiresAt ? String(k.expiresAt) : '-',
    k.lastUsedAt ? String(k.lastUsedAt) : '-',
  ]);
  return table(header, rows);
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows]
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Width of the longest bar of the usage chart, in characters. */
const CHART_WIDTH = 40;

/** A key's daily usage: a table, then one bar a day (admitted █, refused ░) scaled to the busiest day. */
export function formatUsage(usage: {
  keyId: string;
  days: Array<{ date: string; admitted: number; rateLimited: number; banned: number }>;
}): string {
  const rows = usage.days.map((d) => [d.date, String(d.admitted), String(d.rateLimited), String(d.banned)]);
  const busiest = Math.max(1, ...usage.days.map((d) => d.admitted + d.rateLimited + d.banned));
  const bars = usage.days.map((d) => {
    const admitted = Math.round((d.admitted / busiest) * CHART_WIDTH);
    const refused = Math.round(((d.rateLimited + d.banned) / busiest) * CHART_WIDTH);
    return `${d.date.slice(5)} ${'█'.repeat(admitted)}${'░'.repeat(refused)}`.trimEnd();
  });
  return [
    `usage of ${usage.keyId} (UTC days)`,
    table(['DATE', 'ADMITTED', 'RATE LIMITED', 'BANNED'], rows),
    '',
    `█ admitted  ░ refused  (longest bar = ${busiest})`,
    ...bars,
  ].join('\n');
}

/** The audit trail, newest first: one line per admin write. */
export function formatAudit(
  entries: Array<{ at: string; action: string; keyId: string; details: Record<string, unknown> }>,
): string {
  if (entries.length === 0) return 'no audit entries';
  return table(
    ['AT', 'ACTION', 'KEY', 'DETAILS'],
    entries.map((e) => [
      e.at,
      e.action,
      e.keyId,
      Object.keys(e.details).length === 0 ? '-' : JSON.stringify(e.details),
    ]),
  );
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
  if ('expiresAt' in k) lines.push(`expires:    ${k.expiresAt ?? 'never'}`);
  if ('lastUsedAt' in k) lines.push(`last used:  ${k.lastUsedAt ?? 'never'}`);
  if (k.previousKeyExpiresAt) lines.push(`old secret: works until ${k.previousKeyExpiresAt}`);
  if (typeof k.billingDay === 'number') lines.push(`billing:    day ${k.billingDay} of each month, 00:00 UTC`);
  if (typeof k.consumerId === 'string') lines.push(`consumer:   ${k.consumerId}`);
  // Access policy (CONTRACT §4): shown only when the key has a list, so keys without read as before.
  if (Array.isArray(k.allowedOperations))
    lines.push(`operations: ${(k.allowedOperations as string[]).join(', ')} (and usage)`);
  if (Array.isArray(k.allowedAddresses)) lines.push(`addresses:  ${(k.allowedAddresses as string[]).join(', ')}`);
  const usage = k.usage as
    Record<string, { limit: number; remaining: number; reset: number; credits?: number }> | undefined;
  if (usage) {
    for (const window of ['minute', 'day', 'month']) {
      const w = usage[window];
      const credits = w?.credits ? ` (${w.credits} credited)` : '';
      if (w)
        lines.push(
          `${(window + ':').padEnd(11)} ${w.remaining} of ${w.limit}${credits} left, resets ${new Date(w.reset * 1000).toISOString()}`,
        );
    }
  }
  if ('bannedUntil' in k) lines.push(`banned:     ${k.bannedUntil ? `until ${k.bannedUntil}` : 'no'}`);
  return lines.join('\n');
}

/** A client's own view (`GET /v1/usage`): plan, each window, ban and expiry. */
export function formatOwnUsage(usage: {
  plan: string;
  windows: Array<{ name: string; limit: number; remaining: number; reset: number }>;
  bannedUntil: string | null;
  expiresAt: string | null;
}): string {
  const rows = usage.windows.map((w) => [
    w.name,
    String(w.limit),
    String(w.remaining),
    new Date(w.reset * 1000).toISOString(),
  ]);
  return [
    `plan:    ${usage.plan}`,
    table(['WINDOW', 'LIMIT', 'REMAINING', 'RESETS AT'], rows),
    `banned:  ${usage.bannedUntil === null ? 'no' : `until ${usage.bannedUntil}`}`,
    `expires: ${usage.expiresAt ?? 'never'}`,
  ].join('\n');
}

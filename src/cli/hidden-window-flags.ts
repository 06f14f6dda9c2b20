import { CliUsageError } from './cli-usage-error';

/** The windows `--hidden-windows` may name, as the admin API names them. */
const HIDEABLE = ['minute', 'day', 'month'] as const;

/**
 * `--hidden-windows minute,day` (or `none` for an empty list, which shows every window of a plan
 * that hides some) as the `limits.hiddenWindows` the admin API takes; a usage error (exit 2) otherwise.
 */
export function hiddenWindowsFrom(value: string | boolean | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '')
    throw new CliUsageError('--hidden-windows needs none, or one or more of minute,day,month (comma-separated)');
  if (value.trim() === 'none') return [];
  const names = value.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !(HIDEABLE as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new CliUsageError(
      `--hidden-windows: unknown window ${unknown.map((n) => JSON.stringify(n)).join(', ')} (minute, day, month)`,
    );
  return HIDEABLE.filter((name) => names.includes(name));
}

export const hiddenWindowsOption = { 'hidden-windows': { type: 'string' as const } };

import { CliUsageError } from './cli-usage-error';

/** The window names `--windows` takes, as the admin API names them. */
const WINDOW_NAMES = ['minute', 'day', 'month'] as const;

/** `--windows minute,day` as the list POST …/windows/reset takes; a usage error (exit 2) otherwise. */
export function windowsFrom(value: string | boolean | undefined): string[] {
  if (typeof value !== 'string' || value.trim() === '')
    throw new CliUsageError('--windows needs one or more of minute,day,month (comma-separated)');
  const names = value.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !(WINDOW_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new CliUsageError(
      `--windows: unknown window ${unknown.map((n) => JSON.stringify(n)).join(', ')} (minute, day, month)`,
    );
  return [...new Set(names)];
}

/** What a reset answer says each window held: `reset: minute held 3 of 3, day held 40 of 1000`. */
export function formatHeld(reset: unknown): string {
  const held = Object.entries((reset ?? {}) as Record<string, { used: number; limit: number }>);
  return `reset:      ${held.map(([window, w]) => `${window} held ${w.used} of ${w.limit}`).join(', ')}`;
}

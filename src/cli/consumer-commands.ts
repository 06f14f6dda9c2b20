import type { ParseArgsConfig } from 'node:util';
import { formatHeld, windowsFrom } from './window-flags';
import { hiddenWindowsFrom } from './hidden-window-flags';
import { CliUsageError } from './cli-usage-error';

/**
 * `npm run keys -- consumers <list|show|create|update|delete|credits>` (CONTRACT §5's
 * /admin/consumers), each a command of the CLI's own table under the name `consumers <verb>`.
 */

type Values = Record<string, string | boolean | undefined>;

/** What the consumer commands ask of the admin client. */
export interface ConsumerClient {
  call(method: string, path: string, body?: unknown): Promise<unknown>;
}

export interface ConsumerCommand {
  summary: string;
  usage: string;
  options: NonNullable<ParseArgsConfig['options']>;
  positionals: string[];
  run(client: ConsumerClient, values: Values, positionals: string[]): Promise<unknown>;
  render(result: unknown): string;
}

const json = { json: { type: 'boolean' as const } };
const limitOptions = {
  'per-minute': { type: 'string' as const },
  'per-day': { type: 'string' as const },
  'per-month': { type: 'string' as const },
  'billing-day': { type: 'string' as const },
  'hidden-windows': { type: 'string' as const },
};

function whole(flag: string, value: string | boolean | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^[1-9]\d{0,14}$/.test(value))
    throw new CliUsageError(`--${flag} needs a positive whole number`);
  return Number(value);
}

/** Any of --per-minute, --per-day, --per-month, with --hidden-windows; undefined when none is given. */
function limitsFrom(values: Values): Record<string, number | string[]> | undefined {
  const limits: Record<string, number | string[]> = {};
  for (const [flag, field] of [
    ['per-minute', 'perMinute'],
    ['per-day', 'perDay'],
    ['per-month', 'perMonth'],
  ] as const) {
    const n = whole(flag, values[flag]);
    if (n !== undefined) limits[field] = n;
  }
  const hidden = hiddenWindowsFrom(values['hidden-windows']);
  // The limits replace the consumer's whole: hidden windows alone would leave it none to hide.
  if (hidden !== undefined && Object.keys(limits).length === 0)
    throw new CliUsageError('--hidden-windows needs --per-minute, --per-day or --per-month');
  if (hidden !== undefined && hidden.length > 0) limits.hiddenWindows = hidden;
  return Object.keys(limits).length > 0 ? limits : undefined;
}

const path = (id: string, tail = '') => `/admin/consumers/${encodeURIComponent(id)}${tail}`;

type Window = { limit: number; remaining: number; reset: number; credits?: number };

/** A consumer for a person: its fields, its keys and its windows when the answer has them. */
export function formatConsumer(c: Record<string, unknown>): string {
  const limits = c.limits as Record<string, number>;
  const shown =
    Object.entries(limits)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || 'none (nothing shared)';
  const lines = [
    `id:         ${String(c.id)}`,
    `name:       ${String(c.name)}`,
    `limits:     ${shown}`,
    `billing:    day ${String(c.billingDay)} of each month, 00:00 UTC`,
    `created:    ${String(c.createdAt)}`,
  ];
  if (Array.isArray(c.keyIds)) lines.push(`keys:       ${(c.keyIds as string[]).join(', ') || '-'}`);
  const usage = c.usage as Record<string, Window> | undefined;
  for (const window of ['minute', 'day', 'month']) {
    const w = usage?.[window];
    const credits = w?.credits ? ` (${w.credits} credited)` : '';
    if (w)
      lines.push(
        `${(window + ':').padEnd(11)} ${w.remaining} of ${w.limit}${credits} left, resets ${new Date(w.reset * 1000).toISOString()}`,
      );
  }
  return lines.join('\n');
}

function formatConsumerTable(rows: Array<Record<string, unknown>>): string {
  if (rows.length === 0) return 'no consumers';
  const lines = rows.map((c) => `${String(c.id)}  ${String(c.name)}  ${JSON.stringify(c.limits)}`);
  return ['ID                            NAME  LIMITS', ...lines].join('\n');
}

export const consumerCommands: Record<string, ConsumerCommand> = {
  'consumers list': {
    summary: 'list consumers (the customers behind keys, with limits shared by their keys)',
    usage: 'consumers list [--json]',
    options: { ...json },
    positionals: [],
    run: (client) => client.call('GET', '/admin/consumers'),
    render: (result) => formatConsumerTable(result as Array<Record<string, unknown>>),
  },
  'consumers show': {
    summary: 'show a consumer with its keys and the live state of its windows',
    usage: 'consumers show ID [--json]',
    options: { ...json },
    positionals: ['ID'],
    run: (client, _values, [id]) => client.call('GET', path(id!)),
    render: (result) => formatConsumer(result as Record<string, unknown>),
  },
  'consumers create': {
    summary: 'create a consumer; its limits are shared by all its keys',
    usage:
      'consumers create --name NAME [--per-minute N] [--per-day N] [--per-month N] [--hidden-windows minute,day,month] [--billing-day 1..28] [--json]',
    options: { name: { type: 'string' }, ...limitOptions, ...json },
    positionals: [],
    run: (client, values) => {
      if (typeof values.name !== 'string') throw new CliUsageError('--name is required');
      const limits = limitsFrom(values);
      const billingDay = whole('billing-day', values['billing-day']);
      return client.call('POST', '/admin/consumers', {
        name: values.name,
        ...(limits ? { limits } : {}),
        ...(billingDay ? { billingDay } : {}),
      });
    },
    render: (result) => formatConsumer(result as Record<string, unknown>),
  },
  'consumers update': {
    summary: "change a consumer's name, limits (given ones replace all) or billing day",
    usage:
      'consumers update ID [--name NAME] [--per-minute N] [--per-day N] [--per-month N] [--hidden-windows minute,day,month | --clear-limits] [--billing-day 1..28] [--json]',
    options: { name: { type: 'string' }, ...limitOptions, 'clear-limits': { type: 'boolean' }, ...json },
    positionals: ['ID'],
    run: (client, values, [id]) => {
      const patch: Record<string, unknown> = {};
      if (typeof values.name === 'string') patch.name = values.name;
      const limits = limitsFrom(values);
      if (limits && values['clear-limits'])
        throw new CliUsageError('--clear-limits cannot go with --per-minute/--per-day/--per-month');
      if (limits) patch.limits = limits;
      if (values['clear-limits']) patch.limits = null;
      const billingDay = whole('billing-day', values['billing-day']);
      if (billingDay !== undefined) patch.billingDay = billingDay;
      if (Object.keys(patch).length === 0)
        throw new CliUsageError('nothing to update: give --name, limits, --clear-limits or --billing-day');
      return client.call('PATCH', path(id!), patch);
    },
    render: (result) => formatConsumer(result as Record<string, unknown>),
  },
  'consumers delete': {
    summary: 'delete a consumer none of whose keys is active',
    usage: 'consumers delete ID [--json]',
    options: { ...json },
    positionals: ['ID'],
    run: async (client, _values, [id]) => {
      await client.call('DELETE', path(id!));
      return { id, deleted: true };
    },
    render: (result) => `deleted ${(result as { id: string }).id}`,
  },
  'consumers credits': {
    summary: "add one-off units to a consumer's current billing month (it needs a month quota)",
    usage: 'consumers credits ID --units N [--json]',
    options: { units: { type: 'string' }, ...json },
    positionals: ['ID'],
    run: (client, values, [id]) => {
      if (typeof values.units !== 'string' || !/^[1-9]\d{0,9}$/.test(values.units))
        throw new CliUsageError('--units needs a whole number from 1 to 1000000000');
      return client.call('POST', path(id!, '/credits'), { units: Number(values.units) });
    },
    render: (result) => formatConsumer(result as Record<string, unknown>),
  },
  'consumers reset-windows': {
    summary: "start a consumer's minute, day or month window again from zero (its keys' own windows stay; audited)",
    usage: 'consumers reset-windows ID --windows minute,day,month [--json]',
    options: { windows: { type: 'string' }, ...json },
    positionals: ['ID'],
    run: (client, values, [id]) =>
      client.call('POST', path(id!, '/windows/reset'), { windows: windowsFrom(values.windows) }),
    render: (result) =>
      `${formatConsumer(result as Record<string, unknown>)}\n${formatHeld((result as { reset?: unknown }).reset)}`,
  },
};

/** `consumers VERB …` as the table's name `consumers VERB`; other argument lists unchanged. */
export function consumerCommandName(argv: string[]): string[] {
  if (argv[0] !== 'consumers' || argv.length < 2 || argv[1]!.startsWith('-')) return argv;
  return [`consumers ${argv[1]}`, ...argv.slice(2)];
}

import '../shared/supported-runtime';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AdminClient, AdminRequestError } from './admin-client';
import { formatAudit, formatKey, formatKeyTable, formatOwnUsage, formatUsage } from './format';
import { parseDurationSeconds } from './duration';
import { escapeControls, escapeStrings, terminalSafeJson } from './terminal-text';
import { CliUsageError } from './cli-usage-error';
import { consumerCommandName, consumerCommands } from './consumer-commands';
import { ACCESS_USAGE, CLEAR_ACCESS_USAGE, accessListsFrom, accessOptions, clearAccessOptions } from './access-flags';
import { formatHeld, windowsFrom } from './window-flags';
import { hiddenWindowsFrom, hiddenWindowsOption } from './hidden-window-flags';

interface Command {
  summary: string;
  usage: string;
  options: NonNullable<ParseArgsConfig['options']>;
  positionals: string[];
  /** `gateway`: the command speaks to the gateway with the client's API key, not to the admin API. */
  target?: 'gateway';
  /** The command writes its output itself, as it arrives (`write`); it returns STREAMED. */
  run(
    client: AdminClient,
    values: Record<string, string | boolean | undefined>,
    positionals: string[],
    write: (chunk: string) => Promise<void>,
  ): Promise<unknown>;
  /** How to print the result for a person. */
  render(result: unknown): string;
  /** The result is JSON text for a file (the export's NDJSON): printed as it is, made safe for a terminal. */
  machineText?: true;
}

const jsonOption = { json: { type: 'boolean' as const } };

/** What a command that wrote its own output returns: nothing is left to print. */
const STREAMED = Symbol('streamed');

type LimitsFlags = {
  perMinute: number;
  perDay: number;
  perMonth?: number;
  maxInFlight?: number;
  hiddenWindows?: string[];
};

function limitsFrom(values: Record<string, string | boolean | undefined>): LimitsFlags | undefined {
  const perMinute = values['per-minute'];
  const perDay = values['per-day'];
  const perMonth = values['per-month'];
  const maxInFlight = values['max-in-flight'];
  const hiddenWindows = hiddenWindowsFrom(values['hidden-windows']);
  if (
    perMinute === undefined &&
    perDay === undefined &&
    perMonth === undefined &&
    maxInFlight === undefined &&
    hiddenWindows === undefined
  )
    return undefined;
  if (perMinute === undefined || perDay === undefined) {
    throw new UsageError(
      perMonth === undefined && maxInFlight === undefined && hiddenWindows === undefined
        ? '--per-minute and --per-day go together'
        : '--per-month, --max-in-flight and --hidden-windows need --per-minute and --per-day',
    );
  }
  const parse = (flag: string, v: string | boolean) => {
    if (typeof v !== 'string' || !/^[1-9]\d*$/.test(v)) throw new UsageError(`--${flag} needs a positive whole number`);
    return Number(v);
  };
  const limits: LimitsFlags = { perMinute: parse('per-minute', perMinute), perDay: parse('per-day', perDay) };
  if (perMonth !== undefined) limits.perMonth = parse('per-month', perMonth);
  // The admin API checks the range (1..10,000) and says so.
  if (maxInFlight !== undefined) limits.maxInFlight = parse('max-in-flight', maxInFlight);
  if (hiddenWindows !== undefined) limits.hiddenWindows = hiddenWindows;
  return limits;
}

const limitOptions = {
  'per-minute': { type: 'string' as const },
  'per-day': { type: 'string' as const },
  'per-month': { type: 'string' as const },
  'max-in-flight': { type: 'string' as const },
  ...hiddenWindowsOption,
};

class UsageError extends CliUsageError {}

function durationOf(flag: string, value: string | boolean | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = typeof value === 'string' ? parseDurationSeconds(value) : null;
  if (seconds === null) throw new UsageError(`--${flag} needs a duration such as 90s, 15m, 12h, 30d or 2w`);
  return seconds;
}

/** `--expires-in 30d` (from now) or `--expires-at <RFC 3339 instant>`; the admin API checks the instant. */
function expiryFrom(values: Record<string, string | boolean | undefined>): string | undefined {
  const inSeconds = durationOf('expires-in', values['expires-in']);
  const at = values['expires-at'];
  if (inSeconds !== undefined && at !== undefined) throw new UsageError('give --expires-in or --expires-at, not both');
  if (inSeconds !== undefined) return new Date(Date.now() + inSeconds * 1000).toISOString();
  return typeof at === 'string' ? at : undefined;
}

function positiveInt(flag: string, value: string | boolean | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^[1-9]\d{0,5}$/.test(value))
    throw new UsageError(`--${flag} needs a positive whole number`);
  return Number(value);
}

const expiryOptions = { 'expires-in': { type: 'string' as const }, 'expires-at': { type: 'string' as const } };

const keyCommands: Record<string, Command> = {
  create: {
    summary: 'create a key (the full key is shown once)',
    usage: `create --name NAME --plan PLAN [--per-minute N --per-day N [--per-month N] [--max-in-flight N] [--hidden-windows minute,day,month|none]] [--billing-day 1..28] [--expires-in 30d | --expires-at INSTANT] ${ACCESS_USAGE} [--consumer ID] [--json]`,
    options: {
      name: { type: 'string' },
      plan: { type: 'string' },
      ...limitOptions,
      'billing-day': { type: 'string' },
      ...expiryOptions,
      ...accessOptions,
      consumer: { type: 'string' },
      ...jsonOption,
    },
    positionals: [],
    run: (client, values) => {
      if (typeof values.name !== 'string') throw new UsageError('--name is required');
      if (typeof values.plan !== 'string') throw new UsageError('--plan is required');
      const limits = limitsFrom(values);
      const expiresAt = expiryFrom(values);
      const billingDay = positiveInt('billing-day', values['billing-day']);
      const access = accessListsFrom(values, (message) => new UsageError(message));
      const consumer = typeof values.consumer === 'string' ? { consumerId: values.consumer } : {};
      return client.createKey({
        name: values.name,
        plan: values.plan,
        ...(limits ? { limits } : {}),
        ...(expiresAt ? { expiresAt } : {}),
        ...(billingDay ? { billingDay } : {}),
        ...access,
        ...consumer,
      });
    },
    render: (result) => {
      const created = result as { key: string } & Record<string, unknown>;
      return `${formatKey(created)}\n\nkey (shown once, store it now):\n  ${created.key}`;
    },
  },
  list: {
    summary: 'list keys (never the keys themselves)',
    usage: 'list [--json]',
    options: { ...jsonOption },
    positionals: [],
    run: (client) => client.listKeys(),
    render: (result) => formatKeyTable(result as Array<Record<string, unknown>>),
  },
  show: {
    summary: 'show a key with its live usage and ban',
    usage: 'show ID [--json]',
    options: { ...jsonOption },
    positionals: ['ID'],
    run: (client, _values, [id]) => client.getKey(id!),
    render: (result) => formatKey(result as Record<string, unknown>),
  },
  update: {
    summary: "change a key's name, plan, limits, expiry, access policy or consumer",
    usage: `update ID [--name NAME] [--plan PLAN] [--per-minute N --per-day N [--per-month N] [--max-in-flight N] [--hidden-windows minute,day,month|none] | --clear-limits] [--expires-in 30d | --expires-at INSTANT | --no-expiry] ${CLEAR_ACCESS_USAGE} [--consumer ID | --no-consumer] [--json]`,
    options: {
      name: { type: 'string' },
      plan: { type: 'string' },
      ...limitOptions,
      'clear-limits': { type: 'boolean' },
      ...expiryOptions,
      'no-expiry': { type: 'boolean' },
      ...accessOptions,
      ...clearAccessOptions,
      consumer: { type: 'string' },
      'no-consumer': { type: 'boolean' },
      ...jsonOption,
    },
    positionals: ['ID'],
    run: (client, values, [id]) => {
      const patch: Record<string, unknown> = {};
      if (typeof values.name === 'string') patch.name = values.name;
      if (typeof values.plan === 'string') patch.plan = values.plan;
      const limits = limitsFrom(values);
      if (limits && values['clear-limits'])
        throw new UsageError('--clear-limits cannot go with --per-minute/--per-day');
      if (limits) patch.limits = limits;
      if (values['clear-limits']) patch.limits = null;
      const expiresAt = expiryFrom(values);
      if (expiresAt !== undefined && values['no-expiry'])
        throw new UsageError('--no-expiry cannot go with --expires-in/--expires-at');
      if (expiresAt !== undefined) patch.expiresAt = expiresAt;
      if (values['no-expiry']) patch.expiresAt = null;
      Object.assign(
        patch,
        accessListsFrom(values, (message) => new UsageError(message)),
      );
      if (typeof values.consumer === 'string' && values['no-consumer'])
        throw new UsageError('--no-consumer cannot go with --consumer');
      if (typeof values.consumer === 'string') patch.consumerId = values.consumer;
      if (values['no-consumer']) patch.consumerId = null;
      if (Object.keys(patch).length === 0)
        throw new UsageError(
          'nothing to update: give --name, --plan, limits, --clear-limits, an expiry, an access list or a consumer',
        );
      return client.updateKey(id!, patch);
    },
    render: (result) => formatKey(result as Record<string, unknown>),
  },
  revoke: {
    summary: 'revoke a key for good',
    usage: 'revoke ID [--json]',
    options: { ...jsonOption },
    positionals: ['ID'],
    run: async (client, _values, [id]) => {
      await client.revokeKey(id!);
      return { id, revoked: true };
    },
    render: (result) => `revoked ${(result as { id: string }).id}`,
  },
  unban: {
    summary: 'lift a temporary ban',
    usage: 'unban ID [--json]',
    options: { ...jsonOption },
    positionals: ['ID'],
    run: async (client, _values, [id]) => {
      await client.liftBan(id!);
      return { id, unbanned: true };
    },
    render: (result) => `ban lifted for ${(result as { id: string }).id}`,
  },
  credits: {
    summary: "add one-off units to a key's current billing month (gone when it ends; the key needs a month quota)",
    usage: 'credits ID --units N [--json]',
    options: { units: { type: 'string' }, ...jsonOption },
    positionals: ['ID'],
    run: (client, values, [id]) => {
      if (typeof values.units !== 'string' || !/^[1-9]\d{0,9}$/.test(values.units))
        throw new UsageError('--units needs a whole number from 1 to 1000000000');
      return client.addCredits(id!, Number(values.units));
    },
    render: (result) => formatKey(result as Record<string, unknown>),
  },
  'reset-windows': {
    summary: "start a key's minute, day or month window again from zero (a month keeps its credits; audited)",
    usage: 'reset-windows ID --windows minute,day,month [--json]',
    options: { windows: { type: 'string' }, ...jsonOption },
    positionals: ['ID'],
    run: (client, values, [id]) =>
      client.call('POST', `/admin/keys/${encodeURIComponent(id!)}/windows/reset`, {
        windows: windowsFrom(values.windows),
      }),
    render: (result) =>
      `${formatKey(result as Record<string, unknown>)}\n${formatHeld((result as { reset?: unknown }).reset)}`,
  },
  rotate: {
    summary: 'give a key a new secret; the old one works for the grace period (default 1d)',
    usage: 'rotate ID [--grace 1d] [--json]',
    options: { grace: { type: 'string' }, ...jsonOption },
    positionals: ['ID'],
    run: (client, values, [id]) => {
      const graceSeconds = durationOf('grace', values.grace);
      return client.rotateKey(id!, graceSeconds === undefined ? {} : { graceSeconds });
    },
    render: (result) => {
      const rotated = result as { key: string; previousKeyExpiresAt: string } & Record<string, unknown>;
      return `${formatKey(rotated)}\nold secret works until ${rotated.previousKeyExpiresAt}\n\nnew key (shown once, store it now):\n  ${rotated.key}`;
    },
  },
  usage: {
    summary: 'daily usage of a key (UTC days): admitted, rate-limited, banned',
    usage: 'usage ID [--days N] [--json]',
    options: { days: { type: 'string' }, ...jsonOption },
    positionals: ['ID'],
    run: (client, values, [id]) => client.keyUsage(id!, positiveInt('days', values.days)),
    render: (result) => formatUsage(result as Parameters<typeof formatUsage>[0]),
  },
  'my-usage': {
    summary: "a client's own key: plan, windows, ban, expiry (GET /v1/usage; API_KEY, no admin token)",
    usage: 'my-usage [--json]   (environment: API_KEY, GATEWAY_URL)',
    options: { ...jsonOption },
    positionals: [],
    target: 'gateway',
    run: (client) => client.ownUsage(),
    render: (result) => formatOwnUsage(result as Parameters<typeof formatOwnUsage>[0]),
  },
  export: {
    summary: 'every key record as NDJSON (hashes only, never a key): npm run keys -- export > keys.ndjson',
    usage: 'export > keys.ndjson',
    options: {},
    positionals: [],
    run: async (client, _values, _positionals, write) => {
      await client.exportKeys(write);
      return STREAMED;
    },
    render: () => '',
  },
  'usage-export': {
    summary: 'usage per key and UTC day (admitted, units, rate-limited, banned) as NDJSON, for billing',
    usage: 'usage-export --from YYYY-MM-DD --to YYYY-MM-DD > usage.ndjson   (400 days at most)',
    options: { from: { type: 'string' }, to: { type: 'string' } },
    positionals: [],
    run: async (client, values, _positionals, write) => {
      if (typeof values.from !== 'string') throw new UsageError('--from is required (a UTC date, YYYY-MM-DD)');
      if (typeof values.to !== 'string') throw new UsageError('--to is required (a UTC date, YYYY-MM-DD)');
      await client.usageExport(values.from, values.to, write);
      return STREAMED;
    },
    render: () => '',
  },
  import: {
    summary: 'load an export: ids and states kept, all or nothing; a second import changes nothing',
    usage: 'import FILE [--json]',
    options: { ...jsonOption },
    positionals: ['FILE'],
    run: (client, _values, [file]) => {
      // Sent as it is read: a backup of 100,000 keys is never held whole.
      try {
        fs.accessSync(file!, fs.constants.R_OK);
        if (!fs.statSync(file!).isFile()) throw Object.assign(new Error('not a file'), { code: 'EISDIR' });
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
      return client.importKeys(fs.createReadStream(file!));
    },
    render: (result) => {
      const { imported, unchanged } = result as { imported: number; unchanged: number };
      return `imported ${imported} key record(s), ${unchanged} already as in the file`;
    },
  },
  reload: {
    summary:
      're-read the config and TLS certificate files (as SIGHUP): applied whole, or refused naming each bad setting',
    usage: 'reload [--json]',
    options: { ...jsonOption },
    positionals: [],
    run: async (client) => {
      try {
        return await client.reload();
      } catch (err) {
        const errors = (err as AdminRequestError).body as {
          errors?: Array<{ setting: string; message: string }>;
        } | null;
        if (!(err instanceof AdminRequestError) || !errors?.errors) throw err;
        // The CLI's own layout, one line per setting: what the API sent is escaped here, the line breaks are ours.
        const lines = errors.errors
          .map((e) => `\n  ${escapeControls(String(e.setting))}: ${escapeControls(String(e.message))}`)
          .join('');
        throw new AdminRequestError(`${err.message}${lines}`, err.status, err.code, err.body);
      }
    },
    render: (result) => {
      const { hash, restartNeeded } = result as { hash: string; restartNeeded: string[] };
      const restart = restartNeeded.length > 0 ? `\nneeds a restart (left as it was): ${restartNeeded.join(', ')}` : '';
      return `config reloaded: hash ${hash}${restart}`;
    },
  },
  audit: {
    summary: 'the audit trail of admin writes, newest first',
    usage: 'audit [--limit N] [--json]',
    options: { limit: { type: 'string' }, ...jsonOption },
    positionals: [],
    run: (client, values) => client.audit(positiveInt('limit', values.limit)),
    render: (result) => formatAudit((result as { entries: Parameters<typeof formatAudit>[0] }).entries),
  },
};

/** Every command: the keys', then `consumers <verb>` (consumer-commands.ts). */
const commands: Record<string, Command> = { ...keyCommands, ...(consumerCommands as Record<string, Command>) };

function generalHelp(): string {
  const width = Math.max(...Object.keys(commands).map((name) => name.length));
  const rows = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)} ${c.summary}`);
  return [
    'usage: npm run keys -- <command> [options]',
    '',
    'commands:',
    ...rows,
    '',
    'environment:',
    '  ADMIN_URL    admin listener (default http://127.0.0.1:8081)',
    '  ADMIN_TOKEN  admin bearer token (default in development: DATA_DIR/admin-token)',
    '',
    '  GATEWAY_URL  public gateway, for my-usage (default http://127.0.0.1:8080)',
    "  API_KEY      the client's own API key, for my-usage (never an argument: it would stay in shell history)",
    '',
    'Every command takes --help, and --json for output meant for scripts.',
    "`my-usage` is a client's own view of its key (GET /v1/usage: nothing is counted); `show` is the",
    "operator's view of any key.",
  ].join('\n');
}

/** ADMIN_TOKEN, or in development the token `npm start` generated under DATA_DIR. */
function adminToken(env: NodeJS.ProcessEnv): string {
  if (env.ADMIN_TOKEN) return env.ADMIN_TOKEN;
  const file = path.join(env.DATA_DIR ?? './data', 'admin-token');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    throw new AdminRequestError(`ADMIN_TOKEN is not set and ${file} does not exist`, null, null);
  }
}

/** The client's own key, for my-usage: from the environment only, never an argument. */
function apiKey(env: NodeJS.ProcessEnv): string {
  if (env.API_KEY) return env.API_KEY;
  throw new AdminRequestError('API_KEY is not set: my-usage shows the key in API_KEY', null, null);
}

/** Where the CLI writes: results to `out` (stdout), errors and usage after an error to `err` (stderr). */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
  /** Raw output as it streams (no newline added), resolved once it may go on; default: `out` without its newline. */
  write?(chunk: string): Promise<void>;
}

/** What is printed of a result: never a character the terminal would act on (terminal-text.ts). */
function printable(command: Command, result: unknown, json: boolean): string {
  if (json) return terminalSafeJson(JSON.stringify(result, null, 2));
  if (command.machineText) return terminalSafeJson(command.render(result));
  return command.render(escapeStrings(result));
}

/** Exit code: 0 done, 1 the admin API refused or could not be reached, 2 a usage error. */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  { out, err: errOut, write }: CliOutput,
): Promise<number> {
  const [name, ...rest] = consumerCommandName(argv);
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    if (name) out(generalHelp());
    else errOut(`error: no command given\n\n${generalHelp()}`);
    return name ? 0 : 2;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    errOut(`error: unknown command "${escapeControls(name)}"\n\n${generalHelp()}`);
    return 2;
  }
  try {
    if (rest.includes('--help') || rest.includes('-h')) {
      out(`usage: npm run keys -- ${command.usage}\n\n${command.summary}`);
      return 0;
    }
    const { values, positionals } = parseArgs({
      args: rest,
      options: command.options,
      allowPositionals: true,
      strict: true,
    });
    if (positionals.length !== command.positionals.length) {
      throw new UsageError(`expected ${command.positionals.join(' ') || 'no arguments'}`);
    }
    const client =
      command.target === 'gateway'
        ? new AdminClient(env.GATEWAY_URL ?? 'http://127.0.0.1:8080', apiKey(env), {
            variable: 'GATEWAY_URL',
            name: 'the gateway',
          })
        : new AdminClient(env.ADMIN_URL ?? 'http://127.0.0.1:8081', adminToken(env));
    // A streamed result (the usage export's NDJSON) is machine text too: made safe for a terminal chunk by chunk.
    const streamed = write ?? (async (chunk: string) => out(chunk.replace(/\n$/, '')));
    const result = await command.run(
      client,
      values as Record<string, string | boolean | undefined>,
      positionals,
      (chunk) => streamed(terminalSafeJson(chunk)),
    );
    if (result !== STREAMED) out(printable(command, result, values.json === true));
    return 0;
  } catch (err) {
    if (err instanceof CliUsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      errOut(`error: ${escapeControls((err as Error).message)}\nusage: npm run keys -- ${command.usage}`);
      return 2;
    }
    if (err instanceof AdminRequestError) {
      // Line by line: a reload's refusal lays out one setting a line (escaped where it was built).
      errOut(`error: ${err.message.split('\n').map(escapeControls).join('\n')}`);
      return 1;
    }
    throw err;
  }
}

if (require.main === module) {
  runCli(process.argv.slice(2), process.env, {
    out: (text) => process.stdout.write(text + '\n'),
    err: (text) => process.stderr.write(text + '\n'),
    // Waits while stdout (a pipe, a slow file) is behind, so a long export is never held in memory.
    write: (chunk) =>
      new Promise((resolve) => (process.stdout.write(chunk) ? resolve() : process.stdout.once('drain', resolve))),
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (err: Error) => {
      process.stderr.write(`error: ${escapeControls(err.message)}\n`);
      process.exitCode = 1;
    },
  );
}

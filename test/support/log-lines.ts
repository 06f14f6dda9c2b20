import { eventually, type EventuallyOptions } from './eventually';

/** One line of the product's log (pino): the fields tests read most, and any other. */
export type LogLine = Record<string, unknown> & {
  level?: number;
  time?: string;
  msg?: string;
  component?: string;
  requestId?: string;
  durationMs?: number;
  worker?: number;
};

/**
 * Where the product's log lines are: an in-process product (`ProductHarness`, its `logs`), a
 * `LogCapture`, a child process's output as text (stdout, stderr), or lines already split.
 */
export type LogSource =
  { logs: { lines: readonly string[] } } | { lines: readonly string[] } | string | readonly string[];

function rawLines(source: LogSource): readonly string[] {
  if (typeof source === 'string') {
    // A child's output may end in a line still being written: only lines ended by a newline count.
    const lines = source.split('\n');
    lines.pop();
    return lines;
  }
  if ('logs' in source) return source.logs.lines;
  if ('lines' in source) return source.lines;
  return source;
}

/**
 * The test kit's one reader of the product's log lines: each line that holds a JSON object, parsed,
 * from line `from` on (take `logLines(source).length` before an action to read only what it logged).
 * Other lines (a banner, a line another library printed) are skipped; a line that starts as JSON
 * and does not parse fails the test, naming it.
 */
export function logLines(source: LogSource, from = 0): LogLine[] {
  const parsed: LogLine[] = [];
  for (const line of rawLines(source).slice(from)) {
    if (!line.startsWith('{')) continue;
    try {
      parsed.push(JSON.parse(line) as LogLine);
    } catch {
      throw new Error(`a log line that is not JSON: ${line}`);
    }
  }
  return parsed;
}

/** The lines whose fields equal `fields` (e.g. `{ msg: 'request', requestId }`). */
export function logLinesWith(source: LogSource, fields: Partial<LogLine>, from = 0): LogLine[] {
  return logLines(source, from).filter((line) => Object.entries(fields).every(([name, value]) => line[name] === value));
}

/**
 * The first line whose fields equal `fields`, once it is written (a request's line is written on
 * 'finish', which may trail the answer). `source` is a function for a child's output that grows.
 */
export async function eventuallyLogLine(
  source: LogSource | (() => LogSource),
  fields: Partial<LogLine>,
  options: EventuallyOptions = {},
): Promise<LogLine> {
  const read = () => logLinesWith(typeof source === 'function' ? source() : source, fields)[0];
  await eventually(() => read() !== undefined, { what: `a log line with ${JSON.stringify(fields)}`, ...options });
  return read()!;
}

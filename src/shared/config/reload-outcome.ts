import { ConfigError } from './errors';

/** The answer of POST /admin/reload (and what SIGHUP logs). */
export type ReloadOutcome =
  | { result: 'success'; hash: string; restartNeeded: string[] }
  | {
      result: 'failure';
      code: 'invalid_config';
      message: string;
      status: 400;
      errors: Array<{ setting: string; message: string }>;
    };

/** The last attempt, for GET /admin/config and the console. */
export interface LastReload {
  at: string;
  result: 'success' | 'failure';
  trigger: string;
}

const PROBLEM_LINE = /^(?:invalid|unknown|missing) setting (\S+(?: \([^)]*\))?): (.*)$/s;

/** One ConfigError line ("invalid setting PORT (server.port): must be …") as {setting, message}. */
export function problemEntry(problem: string): { setting: string; message: string } {
  const match = PROBLEM_LINE.exec(problem);
  return match ? { setting: match[1]!, message: match[2]! } : { setting: '(config)', message: problem };
}

/** Any failure to load or check the config as the reload's 400 answer: every bad setting named. */
export function failedReload(err: unknown): Extract<ReloadOutcome, { result: 'failure' }> {
  const problems =
    err instanceof ConfigError ? err.problems : [`cannot load the configuration: ${(err as Error).message}`];
  return {
    result: 'failure',
    code: 'invalid_config',
    message: `The configuration was refused (${problems.length} problem${problems.length === 1 ? '' : 's'}); the config in force is unchanged.`,
    status: 400,
    errors: problems.map(problemEntry),
  };
}

/** GET /admin/config: the config in force (secrets redacted), its hash, and the last reload. */
export interface ConfigView {
  hash: string;
  lastReload: LastReload | null;
  config: unknown;
}

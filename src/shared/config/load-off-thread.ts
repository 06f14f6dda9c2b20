import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ConfigError } from './errors';
import type { LoadConfigOptions } from './load';
import type { Config } from './schema';

/** What the loader thread answers: the config, or why there is none. */
export type LoadAnswer = { ok: true; config: Config } | { ok: false; problems?: string[]; message?: string };

/** Memory the loader thread may use: a 1 MiB file of YAML needs a few tens of megabytes. */
const LOADER_HEAP_MB = 256;
/** A load still running after this is stopped and the reload refused (1 MiB of YAML can take tens of seconds on a busy machine). */
const LOADER_TIMEOUT_MS = 60_000;

/**
 * loadConfig() on a thread of its own, for a reload in a process that serves requests: reading,
 * parsing (YAML takes about a second per megabyte here) and validating must not stall the
 * listeners (issue 42). The same config, or the same ConfigError naming every bad setting.
 */
export function loadConfigOffThread(
  options: Pick<LoadConfigOptions, 'env' | 'configDir' | 'role'> = {},
): Promise<Config> {
  return new Promise((resolve, reject) => {
    // load-worker.js when built, load-worker.ts when run from source (the parent's -r hook is inherited).
    const entry = path.join(__dirname, `load-worker${path.extname(__filename)}`);
    const worker = new Worker(entry, {
      workerData: options,
      resourceLimits: { maxOldGenerationSizeMb: LOADER_HEAP_MB },
    });
    let answered = false;
    const timer = setTimeout(() => {
      answered = true;
      void worker.terminate();
      reject(new Error(`reading the config took longer than ${LOADER_TIMEOUT_MS / 1000} s`));
    }, LOADER_TIMEOUT_MS);
    timer.unref();
    worker.once('message', (answer: LoadAnswer) => {
      clearTimeout(timer);
      if (answered) return;
      answered = true;
      if (answer.ok) resolve(answer.config);
      else
        reject(
          answer.problems
            ? new ConfigError(answer.problems)
            : new Error(answer.message ?? 'the config could not be loaded'),
        );
    });
    worker.once('error', (err) => {
      clearTimeout(timer);
      if (answered) return;
      answered = true;
      reject(new Error(`the config could not be loaded: ${err.message}`));
    });
    worker.once('exit', (code) => {
      clearTimeout(timer);
      if (!answered) reject(new Error(`the config loader stopped (exit code ${code})`));
    });
  });
}

import { parentPort, workerData } from 'node:worker_threads';
import { ConfigError } from './errors';
import { loadConfig } from './load';
import type { LoadAnswer } from './load-off-thread';

/** The loader thread of loadConfigOffThread: one load, one answer, then it ends. */
let answer: LoadAnswer;
try {
  answer = { ok: true, config: loadConfig(workerData as Parameters<typeof loadConfig>[0]) };
} catch (err) {
  answer =
    err instanceof ConfigError
      ? { ok: false, problems: [...err.problems] }
      : { ok: false, message: (err as Error).message };
}
parentPort!.postMessage(answer);

import type { Config } from './shared/config';
import { exitAfterLogs, type Logger } from './shared/logger';
import { nodeVersion } from './shared/supported-runtime';
import { tracing } from './shared/telemetry/telemetry';
import type { RunningProduct } from './product';

/** How long past server.shutdownTimeoutMs a stop may take before the process exits regardless. */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 5000;

/** In development, a first start leaves the user one command away from a real response. */
export async function greetDeveloper(config: Config, product: RunningProduct, workers = 1): Promise<void> {
  const lines = [`admin token: ${product.adminToken}`, `admin API:   ${product.adminUrl}/admin/keys`];
  // One HLEN on Redis: a start beside 100,000 keys reads none of them here.
  if (await product.keyService.isEmpty()) {
    const { key, record } = await product.keyService.create({ name: 'development', plan: 'pro' });
    lines.push(
      `created API key ${record.id} on plan ${record.plan} (shown once):`,
      `  ${key}`,
      `try it:`,
      `  curl -H "Authorization: Bearer ${key}" ${product.gatewayUrl}/v1/pets`,
    );
  }
  const processes = workers > 1 ? `, ${workers} workers` : '';
  process.stdout.write(
    `\nanimal-store-gateway (${config.env}, Node ${nodeVersion}${processes}) is ready on ${product.gatewayUrl}\n${lines.map((l) => `  ${l}`).join('\n')}\n\n`,
  );
}

/** The one stderr line for a start that failed (CONTRACT §2: never a stack trace). */
export function startupFailureLine(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  const reason = e.code === 'EADDRINUSE' ? `a port is already in use (${e.message})` : e.message;
  return `animal-store-gateway: cannot start: ${reason}`;
}

/**
 * A stop that always ends: `close` drains what is in flight (bounded by server.shutdownTimeoutMs)
 * and the process exits 0, or 1 if it failed or hung past the backstop. A second signal exits at
 * once with 1; asking again for any other reason (the supervisor's stop message after a Ctrl-C
 * that reached the whole process group) changes nothing.
 */
export function createStopper(close: () => Promise<void>, logger: Logger, shutdownTimeoutMs: number) {
  let stopping = false;
  return function stop(reason: string, { signal = false } = {}): void {
    if (stopping) {
      if (!signal) return;
      logger.warn({ signal: reason }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info(signal ? { signal: reason } : { reason }, 'shutting down');
    // close() cuts connections still open after server.shutdownTimeoutMs; this is the backstop for
    // anything else that hangs (a store that never answers its QUIT), so a stop always ends.
    setTimeout(() => {
      logger.error({ shutdownTimeoutMs }, 'shutdown did not finish: exiting now');
      process.exit(1);
    }, shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS).unref();
    // Spans still queued are exported before the exit (nothing to do when tracing is off), then the
    // last log lines are written.
    close()
      .then(() =>
        // Spans that cannot be exported (a collector away) are lost, but never fail the stop.
        tracing()
          ?.shutdown()
          .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not export the last spans')),
      )
      .then(
        () => exitAfterLogs(logger, 0),
        (err) => {
          logger.error({ err }, 'shutdown failed');
          exitAfterLogs(logger, 1);
        },
      );
  };
}

export function stopOnSignals(stop: (reason: string, options: { signal: boolean }) => void): void {
  process.on('SIGTERM', () => stop('SIGTERM', { signal: true }));
  process.on('SIGINT', () => stop('SIGINT', { signal: true }));
}

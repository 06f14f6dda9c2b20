import {
  ConfigError,
  failedReload,
  planReload,
  webhookTargetProblems,
  type Config,
  type LastReload,
  type ReloadOutcome,
} from '../../shared/config';
import type { AdminListenerAddress } from '../../shared/http/admin-listener-address';
import type { Logger } from '../../shared/logger';
import { readTlsPair, type TlsPair } from '../../shared/http/tls-pair';
import type { ConfigMetrics } from './config-metrics';
import type { ConfigState } from './config-state';

export interface ReloaderOptions {
  state: ConfigState;
  /** Reads every config source again and validates the whole (throws ConfigError naming every bad setting). */
  load(): Config | Promise<Config>;
  /** Puts a validated config (and the TLS pair, when the listener has TLS) in force. */
  apply(config: Config, pair: TlsPair | null, last: LastReload): void | Promise<void>;
  /**
   * What the files cannot show by themselves, asked of what the process holds before anything is
   * applied: a plan removed that keys still use (CONTRACT §5). Config-error lines; empty when fine.
   */
  vet?(current: Config, next: Config): Promise<string[]>;
  metrics: ConfigMetrics;
  logger: Logger;
  now?: () => Date;
  /** Where the admin listener answers now (its port may have been 0 in the config); default: the config's. */
  adminListener?: () => AdminListenerAddress;
}

/**
 * Lets requests waiting on the listeners in between the steps of a reload: with a config of up to
 * 1 MiB each step (compare, apply, hash) takes tens of milliseconds, and run back to back they
 * stalled the listener for most of a second (issue 42).
 */
const turnOfTheEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * SIGHUP and POST /admin/reload: re-read the config and the TLS files, validate all of it, and
 * either apply it whole or change nothing. One reload at a time: a second trigger waits for the
 * first, so two never interleave their applies.
 */
export class ConfigReloader {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: ReloaderOptions) {
    options.metrics.setHash(options.state.hash);
  }

  reload(trigger: string): Promise<ReloadOutcome> {
    const attempt = this.queue.then(() => this.attempt(trigger));
    this.queue = attempt.catch(() => undefined);
    return attempt;
  }

  /**
   * Webhook receivers that reach the admin listener, names resolved (webhook-targets.ts): asked
   * only when `notifications` changes, as nothing else can change the answer (the admin address
   * needs a restart, and the send-time check holds a name whose DNS answer changes later).
   */
  private webhookProblems(next: Config, applied: readonly string[]): Promise<string[]> {
    if (!applied.includes('notifications')) return Promise.resolve([]);
    const admin = this.options.adminListener?.() ?? { host: next.server.adminHost, port: next.server.adminPort };
    return webhookTargetProblems(next.notifications, admin);
  }

  private async attempt(trigger: string): Promise<ReloadOutcome> {
    const { state, metrics, logger } = this.options;
    const at = (this.options.now?.() ?? new Date()).toISOString();
    let plan;
    let pair: TlsPair | null;
    try {
      const loaded = await this.options.load();
      await turnOfTheEventLoop();
      plan = planReload(state.config, loaded);
      await turnOfTheEventLoop();
      pair = await readTlsPair(plan.inForce.tls);
      const problems = [
        ...(await this.webhookProblems(plan.inForce, plan.applied)),
        ...((await this.options.vet?.(state.config, plan.inForce)) ?? []),
      ];
      if (problems.length > 0) throw new ConfigError(problems);
    } catch (err) {
      const outcome = failedReload(err);
      metrics.reloads.inc({ result: 'failure' });
      state.record({ at, result: 'failure', trigger });
      logger.error({ trigger, errors: outcome.errors }, 'config reload refused: the config in force is unchanged');
      return outcome;
    }
    const last: LastReload = { at, result: 'success', trigger };
    await this.options.apply(plan.inForce, pair, last);
    await turnOfTheEventLoop();
    state.record(last, plan.inForce);
    metrics.reloads.inc({ result: 'success' });
    metrics.setHash(state.hash);
    logger.info(
      {
        trigger,
        hash: state.hash,
        applied: plan.applied,
        restartNeeded: plan.restartNeeded,
        certificate: pair ? { fingerprint: pair.fingerprint, validTo: pair.validTo } : undefined,
      },
      plan.restartNeeded.length > 0
        ? 'config reloaded; some changes need a restart and were left as they were'
        : 'config reloaded',
    );
    return { result: 'success', hash: state.hash, restartNeeded: plan.restartNeeded };
  }
}

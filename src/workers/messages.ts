import type { TrafficSecond } from '../admin/stats/traffic-recorder';
import type { Config, LastReload, ReloadOutcome } from '../shared/config';
import type { PlanUse } from '../keys/plan-users';

/** A TLS pair as it crosses the IPC channel (JSON): the PEM text of both files. */
export interface PairMessage {
  cert: string;
  key: string;
  fingerprint: string;
  validTo: string;
}

/**
 * What the supervisor and its workers say to each other over the cluster's IPC channel. Every
 * type is prefixed so that prom-client's own messages (and anything else on the channel) pass by.
 */
export type SupervisorMessage =
  /** Finish what is in flight and exit, as on SIGTERM. */
  | { type: 'asg:stop' }
  /** Development only: print the ready key and curl line (one worker does, once). */
  | { type: 'asg:greet' }
  | { type: 'asg:metrics'; id: number; text?: string; error?: string }
  /** Every worker's recent traffic, summed: the answer to a worker's asg:stats. */
  | { type: 'asg:stats'; id: number; seconds: TrafficSecond[] }
  /** Send your recent traffic (asg:stats-part) for collection `id`. */
  | { type: 'asg:stats-collect'; id: number }
  /** Serve requests that start from now on under this config (read and validated once, here); answer asg:config-applied. */
  | { type: 'asg:apply-config'; id: number; config: Config; pair: PairMessage | null; last: LastReload | null }
  /** The answer to a worker's asg:reload. */
  | { type: 'asg:reloaded'; id: number; outcome: ReloadOutcome }
  /** A reload would remove or empty these plans: which does a key use? Answer asg:plan-use. */
  | { type: 'asg:plan-use'; id: number; kind: string; plans: string[] };

export type WorkerMessage =
  /** Both listeners are up. */
  | { type: 'asg:ready'; gatewayUrl: string; adminUrl: string }
  /** Startup failed: the supervisor prints this one line (once, not once per worker) and stops. */
  | { type: 'asg:startup-failed'; line: string }
  /** GET /metrics on this worker: every worker's metrics, summed by the supervisor. */
  | { type: 'asg:metrics'; id: number }
  /** GET /admin/stats on this worker: every worker's recent traffic, summed by the supervisor. */
  | { type: 'asg:stats'; id: number }
  /** This worker's recent traffic, for the supervisor's collection `id`. */
  | { type: 'asg:stats-part'; id: number; seconds: TrafficSecond[] }
  /** POST /admin/reload on this worker: the supervisor reloads for every worker and answers asg:reloaded. */
  | { type: 'asg:reload'; id: number }
  /** This worker serves under the config of asg:apply-config `id`. */
  | { type: 'asg:config-applied'; id: number }
  /** The answer to asg:plan-use: each plan in use, with who uses it, or why it could not be told. */
  | { type: 'asg:plan-use'; id: number; uses?: Array<[string, PlanUse]>; error?: string };

export function isMessage<T extends { type: string }>(message: unknown, type: T['type']): message is T {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === type;
}

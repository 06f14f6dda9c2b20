import { Cluster } from 'ioredis';
import type { RedisClient } from '../../shared/redis/redis';
import { redisKeyLayout } from '../stores/redis-key-store';

/**
 * What an admin write learns after Redis acknowledged it (CONTRACT §4, "acknowledged means
 * durable"): `true` a replica holds it too, `false` none did within the bound (a failover now could
 * lose it), `null` there is no replica to wait for (a lone Redis: its own persistence is what counts).
 */
export type Replication = boolean | null;

export interface WriteReplicationOptions {
  /** Config `redis.namespace`: the probe key lives beside the key records (same Cluster slot, `{k}`). */
  namespace: string;
  /** Config `redis.replicationWaitMs`: WAIT's bound; 0 never waits (every answer `null`). */
  waitMs: number;
  /** Config `redis.commandTimeoutMs`: added to the bound as the dedicated connection's timeout. */
  commandTimeoutMs: number;
  /** Behind Sentinel a replica is expected even when none is connected right now (then: `false`). */
  replicaExpected: boolean;
}

/** The probe lives a minute: long enough for any WAIT, short enough to leave nothing behind. */
const PROBE_TTL_MS = 60_000;

function connectedReplicas(info: string): number {
  return Number(/^connected_slaves:(\d+)/m.exec(info)?.[1] ?? 0);
}

/**
 * Waits, after an admin write, until at least one replica holds it: `SET <probe>` then
 * `WAIT 1 <waitMs>` on a connection of its own (WAIT blocks its connection; the request path's
 * connection must never wait on it). Redis replicates one stream in order, so a replica that
 * acknowledged the probe, written after the admin write was acknowledged, holds the write too. On a
 * Cluster the probe carries the key records' hash tag and so goes to their shard.
 *
 * Whether there are replicas is read (INFO replication, connected_slaves) once at start and after
 * each reconnect, so a lone Redis costs nothing per write; after a WAIT that no replica answered it
 * is read again, and while it is 0 on a replicated setup a write answers `false` without waiting.
 */
export class WriteReplication {
  private readonly probeKey: string;
  /** Replicas of the key records' primary as last read; null before the first read. */
  private replicas: number | null = null;
  /** Seen replicas once (or Sentinel): from then on no replica means `false`, not `null`. */
  private replicatedSetup: boolean;
  private readonly onReady = () => void this.readReplicas().catch(() => {});

  private constructor(
    private readonly connection: RedisClient,
    private readonly options: WriteReplicationOptions,
  ) {
    this.probeKey = redisKeyLayout(options.namespace).replicationProbe;
    this.replicatedSetup = options.replicaExpected;
  }

  /** Opens the dedicated connection (a duplicate of `redis`) and reads the replica count. */
  static async open(redis: RedisClient, options: WriteReplicationOptions): Promise<WriteReplication> {
    const timeout = options.waitMs + options.commandTimeoutMs;
    const connection = (
      redis instanceof Cluster
        ? redis.duplicate(undefined, { redisOptions: { ...redis.options.redisOptions, commandTimeout: timeout } })
        : redis.duplicate({ commandTimeout: timeout })
    ) as RedisClient;
    // Its errors are the command connection's too, which the caller logs.
    connection.on('error', () => {});
    const replication = new WriteReplication(connection, options);
    if (options.waitMs === 0) return replication;
    await connection.connect();
    await replication.readReplicas().catch(() => {});
    connection.on('ready', replication.onReady);
    return replication;
  }

  /** After an acknowledged write: did a replica get it within the bound? Never rejects. */
  async confirm(): Promise<Replication> {
    if (this.options.waitMs === 0) return null;
    try {
      // A lone Redis (never a replica seen, no Sentinel) is read only at start and on reconnect.
      if (this.replicas === null || (this.replicatedSetup && this.replicas === 0)) await this.readReplicas();
      if (!this.replicatedSetup) return null;
      if (this.replicas === 0) return false;
      const acknowledged = await this.waitForReplica();
      if (acknowledged >= 1) return true;
      await this.readReplicas();
      return false;
    } catch {
      return this.replicatedSetup ? false : null;
    }
  }

  async close(): Promise<void> {
    this.connection.off('ready', this.onReady);
    this.connection.disconnect();
  }

  /** One round trip to the key records' primary: the probe and WAIT, pipelined (routed by the probe's slot). */
  private async waitForReplica(): Promise<number> {
    const results = await this.connection
      .pipeline()
      .set(this.probeKey, String(Date.now()), 'PX', PROBE_TTL_MS)
      .wait(1, this.options.waitMs)
      .exec();
    const [setResult, waitResult] = results ?? [];
    if (setResult?.[0]) throw setResult[0];
    if (waitResult?.[0]) throw waitResult[0];
    return Number(waitResult?.[1] ?? 0);
  }

  private async readReplicas(): Promise<void> {
    // EXISTS on the probe routes the pipeline to the key records' primary on a Cluster.
    const results = await this.connection.pipeline().exists(this.probeKey).info('replication').exec();
    const [, infoResult] = results ?? [];
    if (!infoResult || infoResult[0]) throw infoResult?.[0] ?? new Error('INFO replication gave no answer');
    this.replicas = connectedReplicas(String(infoResult[1]));
    if (this.replicas > 0) this.replicatedSetup = true;
  }
}

import type { Config } from '../shared/config';
import type { Clock } from '../shared/clock';
import { closeServer } from '../shared/http/close-server';
import { createBoundedServer } from '../shared/http/http-server';
import type { Logger } from '../shared/logger';
import type { UpstreamTokenSigner } from '../shared/http/upstream-token';
import { createGatewayHandler, type GatewayDependencies, type KeyLookup } from '../gateway/handler';
import type { DecisionDependencies } from '../gateway/steps';
import { createHttpProxyForwarder } from '../gateway/upstream/http-proxy-forwarder';
import type { ForwarderSettings, GuardedForwarder } from '../gateway/upstream/forward-contract';
import { createUndiciForwarder } from '../gateway/upstream/undici-forwarder';
import { UPSTREAM_LABEL, type GatewayMetrics } from '../shared/metrics/metrics';
import { answerUnparsableRequest } from '../shared/http/unparsable-request';
import { markCutOff } from '../gateway/cut-off';
import type { DeprecationUsage } from '../usage/deprecation-usage';
import type { Limiters } from '../limits';
import { createSecureBoundedServer } from '../shared/http/secure-server';
import type { TlsPair } from '../shared/http/tls-pair';
import type { Closers } from './closers';
import { listen, localUrl } from './listen';
import { followingConfig } from './config-following';

/** What a listener that decides requests (the public one, the decision one) is started with. */
export interface DecidingListenerDependencies {
  keyResolver: KeyLookup;
  limiters: Limiters;
  signer: UpstreamTokenSigner;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  random?: () => number;
  deprecationUsage: DeprecationUsage;
  /** Each key's outcome: the usage history and the busiest keys. */
  keyOutcomes: NonNullable<GatewayDependencies['keyActivity']>;
  /** Each limiter decision of a key: usage units and webhooks. */
  keyDecisions: NonNullable<GatewayDependencies['keyDecisions']>;
  /** Each key's consumer, from the directory held in process. */
  consumers?: GatewayDependencies['consumers'];
  /** Each key's consumer's access policy, from the same directory. */
  consumerAccessPolicy?: GatewayDependencies['consumerAccessPolicy'];
  /** POST /v1/keys/revoke: the caller's key revoked, audited and announced. */
  keyRevocation?: GatewayDependencies['keyRevocation'];
  port?: number;
  closers: Closers;
  /** The config in force, asked as each request starts (a reload puts a new one there). */
  configInForce(): Config;
}

export interface GatewayListenerDependencies extends DecidingListenerDependencies {
  forwarder: GuardedForwarder;
}

function createForwarder(kind: Config['upstream']['forwarder'], settings: ForwarderSettings): GuardedForwarder {
  return kind === 'undici' ? createUndiciForwarder(settings) : createHttpProxyForwarder(settings);
}

/** The upstream breaker's transitions: counted, and one log line each (an error when it opens). */
function reportCircuitChanges(
  metrics: GatewayMetrics,
  logger: Logger,
): NonNullable<ForwarderSettings['onCircuitChange']> {
  return (to, from, why) => {
    metrics.upstreamCircuitTransitions.inc({ upstream: UPSTREAM_LABEL, to });
    const line = { upstream: UPSTREAM_LABEL, circuit: to, from, why };
    if (to === 'open')
      logger.error(line, 'upstream circuit open: answering 503 without sending until the cool-down ends');
    else
      logger.warn(
        line,
        to === 'closed' ? 'upstream circuit closed: sending again' : 'upstream circuit half-open: probing',
      );
  };
}

/** The guarded forwarder to the inventory: deadline, bound on waiting requests, circuit breaker. */
export function startForwarder(
  config: Config,
  deps: { upstreamUrl: string; metrics: GatewayMetrics; logger: Logger; clock: Clock; closers: Closers },
): GuardedForwarder {
  const forwarder = createForwarder(config.upstream.forwarder, {
    target: deps.upstreamUrl,
    timeoutMs: config.upstream.timeoutMs,
    maxSockets: config.upstream.maxSockets,
    maxPending: config.upstream.maxPending,
    circuitBreaker: config.upstream.circuitBreaker,
    clock: deps.clock,
    onCircuitChange: reportCircuitChanges(deps.metrics, deps.logger),
  });
  deps.closers.add(() => forwarder.close());
  return forwarder;
}

/** What the steps that decide a request are built from, for the config in force: both listeners' handlers take these. */
export function decisionDependencies(config: Config, deps: DecidingListenerDependencies): DecisionDependencies {
  return {
    config,
    keyResolver: deps.keyResolver,
    keyLimiter: deps.limiters.keyLimiter,
    addressLimiter: deps.limiters.addressLimiter,
    signer: deps.signer,
    metrics: deps.metrics,
    logger: deps.logger,
    clock: deps.clock,
    random: deps.random,
    deprecationUsage: deps.deprecationUsage,
    keyActivity: deps.keyOutcomes,
    keyDecisions: deps.keyDecisions,
    consumers: deps.consumers,
    consumerAccessPolicy: deps.consumerAccessPolicy,
    keyRevocation: deps.keyRevocation,
  };
}

/** The running public listener: its URL, and how a new certificate reaches it. */
export interface GatewayListener {
  url: string;
  /** New TLS handshakes use `pair` (null when the listener is plain HTTP). */
  setTlsPair: ((pair: TlsPair) => void) | null;
}

/**
 * The public listener: the forwarder to the inventory and the request path in front of it, over
 * plain HTTP/1.1, or HTTPS with HTTP/2 and HTTP/1.1 when a TLS pair is given. The server calls
 * one stable listener that asks for the config in force as each request starts and serves it with
 * the handler built for that config: a reload's new config gets a new handler (same forwarder,
 * stores and limiters: nothing opened per reload); requests in flight finish under theirs.
 */
export async function startGatewayListener(
  config: Config,
  deps: GatewayListenerDependencies,
  tlsPair: TlsPair | null = null,
): Promise<GatewayListener> {
  const { metrics, logger, closers, forwarder } = deps;
  const handlerFor = (inForce: Config) => createGatewayHandler({ ...decisionDependencies(inForce, deps), forwarder });
  const listener = followingConfig(config, deps.configInForce, handlerFor);
  const onClientError = answerUnparsableRequest({ metrics, logger, cutOff: markCutOff });
  const { shutdownTimeoutMs } = config.server;
  if (tlsPair) {
    const secure = createSecureBoundedServer(config.server, config.http2, tlsPair, listener);
    secure.server.on('clientError', onClientError);
    const port = await listen(secure.server, deps.port ?? config.server.port, config.server.host);
    closers.add(() => secure.close(shutdownTimeoutMs));
    return { url: localUrl(config.server.host, port, 'https'), setTlsPair: secure.setPair };
  }
  const server = createBoundedServer(config.server, listener);
  server.on('clientError', onClientError);
  const port = await listen(server, deps.port ?? config.server.port, config.server.host);
  closers.add(() => closeServer(server, shutdownTimeoutMs));
  return { url: localUrl(config.server.host, port), setTlsPair: null };
}

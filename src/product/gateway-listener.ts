import type { Config } from '../shared/config';
import type { Clock } from '../shared/clock';
import { closeServer } from '../shared/close-server';
import { createBoundedServer } from '../shared/http-server';
import type { Logger } from '../shared/logger';
import type { UpstreamTokenSigner } from '../shared/upstream-token';
import { createGatewayHandler, type KeyLookup } from '../gateway/handler';
import { createHttpProxyForwarder, type Forwarder, type ForwarderSettings } from '../gateway/forwarder';
import { createUndiciForwarder } from '../gateway/undici-forwarder';
import type { GatewayMetrics } from '../gateway/metrics';
import { answerUnparsableRequest } from '../gateway/unparsable-request';
import { markCutOff } from '../gateway/cut-off';
import type { DeprecationUsageRecorder } from '../gateway/deprecation-usage';
import type { KeyActivityRecorder } from '../keys/key-activity';
import type { Limiters } from '../limits';
import type { Closers } from './closers';
import { listen, localUrl } from './listen';

export interface GatewayListenerDependencies {
  keys: KeyLookup;
  limiters: Limiters;
  signer: UpstreamTokenSigner;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  random?: () => number;
  deprecationUsage: DeprecationUsageRecorder;
  keyActivity: KeyActivityRecorder;
  /** Where the inventory answers. */
  upstreamUrl: string;
  port?: number;
  closers: Closers;
}

function createForwarder(kind: Config['upstream']['forwarder'], settings: ForwarderSettings): Forwarder {
  return kind === 'undici' ? createUndiciForwarder(settings) : createHttpProxyForwarder(settings);
}

/** The public listener: the forwarder to the inventory and the request path in front of it. Resolves its URL. */
export async function startGatewayListener(config: Config, deps: GatewayListenerDependencies): Promise<string> {
  const { metrics, logger, closers } = deps;
  const forwarder = createForwarder(config.upstream.forwarder, {
    target: deps.upstreamUrl,
    timeoutMs: config.upstream.timeoutMs,
    maxSockets: config.upstream.maxSockets,
  });
  closers.add(() => forwarder.close());
  const handleRequest = createGatewayHandler({
    config,
    keys: deps.keys,
    keyLimiter: deps.limiters.keys,
    addressLimiter: deps.limiters.addresses,
    signer: deps.signer,
    forwarder,
    metrics,
    logger,
    clock: deps.clock,
    random: deps.random,
    deprecationUsage: deps.deprecationUsage,
    keyActivity: deps.keyActivity,
  });
  const server = createBoundedServer(config.server, handleRequest);
  server.on('clientError', answerUnparsableRequest({ metrics, logger, cutOff: markCutOff }));
  const port = await listen(server, deps.port ?? config.server.port, config.server.host);
  closers.add(() => closeServer(server, config.server.shutdownTimeoutMs));
  return localUrl(config.server.host, port);
}

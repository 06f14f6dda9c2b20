import type { Config } from '../shared/config';
import { closeServer } from '../shared/http/close-server';
import { createBoundedServer } from '../shared/http/http-server';
import { answerUnparsableRequest } from '../shared/http/unparsable-request';
import { createDecisionHandler } from '../gateway/authz/decision-handler';
import { followingConfig } from './config-following';
import { decisionDependencies, type DecidingListenerDependencies } from './gateway-listener';
import { listen, localUrl } from './listen';

/**
 * The decision listener for an edge proxy (CONTRACT §11, docs/external-auth.md), on AUTHZ_PORT
 * (AUTHZ_HOST, else HOST), plain HTTP/1.1: the proxy's side of the network, never the clients'.
 * Null when AUTHZ_PORT is not set. Under WORKERS > 1 every worker listens on the port, as on the
 * public one (listen.ts). Its handler follows reloads as the public listener's does.
 */
export async function startAuthzListener(config: Config, deps: DecidingListenerDependencies): Promise<string | null> {
  const port = deps.port ?? config.server.authzPort;
  if (port === null) return null;
  const host = config.server.authzHost ?? config.server.host;
  warnAboutConcurrencyLimits(config, deps);
  const listener = followingConfig(config, deps.configInForce, (inForce) =>
    createDecisionHandler(decisionDependencies(inForce, deps)),
  );
  const server = createBoundedServer(config.server, listener);
  server.on('clientError', answerUnparsableRequest({ logger: deps.logger }));
  const bound = await listen(server, port, host);
  deps.closers.add(() => closeServer(server, config.server.shutdownTimeoutMs));
  return localUrl(host, bound);
}

/** maxInFlight needs the request's end, which a decision never sees: said once at start, naming the plans that set it. */
function warnAboutConcurrencyLimits(config: Config, deps: DecidingListenerDependencies): void {
  const plans = Object.entries(config.plans)
    .filter(([, plan]) => plan.maxInFlight !== undefined)
    .map(([name]) => name);
  if (plans.length === 0) return;
  deps.logger.warn(
    { plans },
    "AUTHZ_PORT: the decision listener does not enforce maxInFlight (it never sees a request end); requests decided there are not held to these plans' maxInFlight, nor to a key's own",
  );
}

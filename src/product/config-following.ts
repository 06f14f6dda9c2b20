import type { RequestListener } from 'node:http';
import type { Config } from '../shared/config';

/**
 * One stable listener for a server that asks for the config in force as each request starts and
 * serves it with the handler built for that config: a reload's new config gets a new handler
 * (built from the same stores and limiters: nothing opened per reload); requests in flight finish
 * under theirs.
 */
export function followingConfig(
  config: Config,
  configInForce: () => Config,
  handlerFor: (config: Config) => RequestListener,
): RequestListener {
  let builtFor = config;
  let handleRequest = handlerFor(config);
  return (req, res) => {
    const inForce = configInForce();
    if (inForce !== builtFor) {
      handleRequest = handlerFor(inForce);
      builtFor = inForce;
    }
    handleRequest(req, res);
  };
}

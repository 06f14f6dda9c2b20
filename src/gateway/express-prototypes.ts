import http from 'node:http';
import type { Express } from 'express';

/**
 * The request and response classes for a node:http server in front of `app`, born with Express's
 * prototypes.
 *
 * Express gives every request and response the app's prototypes (`app.request`, `app.response`)
 * with Object.setPrototypeOf, once per request. V8 then sees each req/res as an object of a shape
 * of its own, and node:http's code slows down on all of them: on the bench's machine that cost
 * more CPU per request than the rest of the gateway's chain (see README, Benchmark). Here the
 * classes carry Express's prototypes from the start and become the app's prototypes, so Express's
 * call changes nothing and costs nothing. Every Express method stays on the chain: should a later
 * Express stop reading `app.request`, requests are only slower, never different.
 */
export function expressServerClasses(app: Express): Pick<http.ServerOptions, 'IncomingMessage' | 'ServerResponse'> {
  class ExpressRequest extends http.IncomingMessage {}
  class ExpressResponse extends http.ServerResponse {}
  Object.setPrototypeOf(ExpressRequest.prototype, app.request);
  Object.setPrototypeOf(ExpressResponse.prototype, app.response);
  app.request = ExpressRequest.prototype as unknown as Express['request'];
  app.response = ExpressResponse.prototype as unknown as Express['response'];
  return { IncomingMessage: ExpressRequest, ServerResponse: ExpressResponse as typeof http.ServerResponse };
}

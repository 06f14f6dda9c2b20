import type { RequestHandler } from 'express';

/**
 * A body parser for the limit in force (config `server.maxBodyBytes`, which a reload may change).
 * body-parser takes its limit once, when it is made: this one asks for the limit on every request
 * and makes a new parser only when the answer differs from the last one.
 */
export function bodyParserForLimit(
  limitInForce: () => number,
  parserFor: (limit: number) => RequestHandler,
): RequestHandler {
  let madeFor = Number.NaN;
  let parser: RequestHandler | null = null;
  return (req, res, next) => {
    const limit = limitInForce();
    if (parser === null || limit !== madeFor) {
      parser = parserFor(limit);
      madeFor = limit;
    }
    return parser(req, res, next);
  };
}

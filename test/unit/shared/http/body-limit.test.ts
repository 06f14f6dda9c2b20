import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { bodyParserForLimit } from '../../../../src/shared/http/body-limit';

describe('bodyParserForLimit', () => {
  it('parses with a parser made for the limit in force, made again only when the limit changes', () => {
    let limit = 1024;
    const made: number[] = [];
    const used: number[] = [];
    const parserFor = (madeFor: number): RequestHandler => {
      made.push(madeFor);
      return (_req, _res, next) => {
        used.push(madeFor);
        next();
      };
    };
    const parse = bodyParserForLimit(() => limit, parserFor);
    const next = jest.fn() as NextFunction;
    const run = () => parse({} as Request, {} as Response, next);

    run();
    run();
    limit = 4096;
    run();
    run();
    expect(made).toEqual([1024, 4096]);
    expect(used).toEqual([1024, 1024, 4096, 4096]);
    expect(next).toHaveBeenCalledTimes(4);
  });
});

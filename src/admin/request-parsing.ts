import type { NextFunction, Request, Response } from 'express';
import type { z } from 'zod';
import { ApiError } from '../shared/errors';

/** An integer query parameter within bounds, its default when absent; else 400 invalid_parameter. */
export function intParameter(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^\d{1,6}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ApiError('invalid_parameter', `${name} must be an integer from ${min} to ${max}.`);
  }
  return Number(value);
}

/** A body checked against its schema; the first problem is the 400's message, naming the field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.join('.') : 'body';
    throw new ApiError('validation_failed', `${where}: ${issue.message}`);
  }
  return result.data;
}

/** A JSON body is required: none is 400, another content type 415. */
export function requireJson(req: Request, _res: Response, next: NextFunction): void {
  if (
    req.headers['content-length'] === '0' ||
    (req.headers['content-length'] === undefined && !req.headers['transfer-encoding'])
  ) {
    throw new ApiError('validation_failed', 'A JSON request body is required.');
  }
  if (!req.is('application/json')) throw new ApiError('unsupported_media_type', 'Send the body as application/json.');
  next();
}

/** Whether a request carries a body at all (an optional one, as rotate's). */
export function hasBody(req: Request): boolean {
  return req.headers['content-length'] !== undefined
    ? req.headers['content-length'] !== '0'
    : req.headers['transfer-encoding'] !== undefined;
}

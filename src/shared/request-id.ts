import { randomUUID } from 'node:crypto';

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A client-sent X-Request-Id is kept when it is of sane length and characters; else a new one. */
export function requestIdFor(incoming: string | string[] | undefined): string {
  if (typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming)) return incoming;
  return randomUUID();
}

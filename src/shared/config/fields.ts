import fs from 'node:fs';
import { z } from 'zod';

/** The building blocks of the schema: each kind of setting with the one message an operator sees. */

/** Numbers may arrive as strings from the environment; anything else is left for zod to refuse. */
export const numeric = (schema: z.ZodNumber) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' && !Number.isNaN(Number(v)) ? Number(v) : v), schema);

/** A whole number in [min, max]; every way of missing it gets the same plain message. */
export function wholeNumber(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  const error =
    max === Number.MAX_SAFE_INTEGER
      ? `must be a whole number of at least ${min}`
      : `must be a whole number from ${min} to ${max}`;
  return numeric(z.number({ error }).int({ error }).min(min, { error }).max(max, { error }));
}

export const port = wholeNumber(0, 65535);
const workerCountError = 'must be a whole number from 1 to 256, or auto';
export const workerCount = z.union(
  [
    numeric(
      z
        .number({ error: workerCountError })
        .int({ error: workerCountError })
        .min(1, { error: workerCountError })
        .max(256, { error: workerCountError }),
    ),
    z.literal('auto', { error: workerCountError }),
  ],
  { error: workerCountError },
);
export const positiveInt = wholeNumber(1);
export const durationMs = wholeNumber(1, 3_600_000);
const ratioError = 'must be a number above 0 and at most 1, e.g. 0.5';
/** A share of a whole, such as a failure ratio: above 0, at most 1. */
export const ratio = numeric(
  z.number({ error: ratioError }).gt(0, { error: ratioError }).max(1, { error: ratioError }),
);
export const instant = z.iso.datetime({
  offset: true,
  error: 'must be an ISO 8601 instant with a time zone, e.g. 2030-12-05T00:00:00Z',
});
/** A file read once at startup (a certificate, a key): it must exist and be readable now. */
export const readableFile = z
  .string()
  .min(1)
  .refine(
    (file) => {
      try {
        fs.accessSync(file, fs.constants.R_OK);
        return fs.statSync(file).isFile();
      } catch {
        return false;
      }
    },
    { error: 'must name a readable file' },
  );
export const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

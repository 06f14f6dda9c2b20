import { z } from 'zod';
import { ApiError } from '../shared/errors';
import { decodeCursor } from './pagination-cursor';
import { petStatuses, type NewPet, type PetStatus } from './pet';

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_NAME_LENGTH = 200;

export interface ListPetsParams {
  limit: number;
  status?: PetStatus;
  /** Continue after this id; 0 for the first page. */
  afterId: number;
}

const listParameters = ['limit', 'status', 'cursor'] as const;

function isPetStatus(value: string): value is PetStatus {
  return (petStatuses as readonly string[]).includes(value);
}

/**
 * Reads GET /v1/pets's query string. Parsed here rather than by express so that every spelling of
 * a parameter is seen: `limit=1&limit=2` and `limit[]=1` are refused, not silently collapsed.
 * Parameters this operation does not define are ignored.
 */
export function parseListQuery(queryString: string): ListPetsParams {
  const params = new URLSearchParams(queryString);
  for (const key of params.keys()) {
    const bracketed = listParameters.find((name) => key.startsWith(`${name}[`));
    if (bracketed) throw invalidParameter(`Query parameter \`${bracketed}\` must be a single plain value.`);
  }
  const single = (name: (typeof listParameters)[number]): string | undefined => {
    const values = params.getAll(name);
    if (values.length > 1) throw invalidParameter(`Query parameter \`${name}\` must be given at most once.`);
    return values[0];
  };

  const rawLimit = single('limit');
  let limit = DEFAULT_PAGE_SIZE;
  if (rawLimit !== undefined) {
    limit = /^[0-9]{1,10}$/.test(rawLimit) ? Number(rawLimit) : NaN;
    if (!(limit >= 1 && limit <= MAX_PAGE_SIZE)) {
      throw invalidParameter(`Query parameter \`limit\` must be an integer from 1 to ${MAX_PAGE_SIZE}.`);
    }
  }

  const rawStatus = single('status');
  if (rawStatus !== undefined && !isPetStatus(rawStatus)) {
    throw invalidParameter(`Query parameter \`status\` must be one of ${petStatuses.join(', ')}.`);
  }

  const rawCursor = single('cursor');
  let afterId = 0;
  if (rawCursor !== undefined) {
    const decoded = decodeCursor(rawCursor);
    if (decoded === null) {
      throw invalidParameter(
        'Query parameter `cursor` is not valid: use the URL of a `Link: rel="next"` header unchanged.',
      );
    }
    afterId = decoded;
  }

  return rawStatus === undefined ? { limit, afterId } : { limit, status: rawStatus, afterId };
}

/** The `{petId}` path segment: digits only, 1 ≤ id ≤ 2^53−1. */
export function parsePetId(raw: string): number {
  const id = /^[0-9]{1,20}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(id) || id < 1) {
    throw invalidParameter(
      `Path parameter \`petId\` must be a positive integer no greater than ${Number.MAX_SAFE_INTEGER}.`,
    );
  }
  return id;
}

/** Characters as a person counts them: code points, not UTF-16 units. */
const codePointLength = (s: string): number => [...s].length;

const required = (expected: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? 'is required' : `must be ${expected}`;

/** NewPet as the contract defines it (CONTRACT §3); the output is what gets stored. */
export const newPetSchema = z.strictObject({
  name: z
    .string({ error: required('a string') })
    .trim()
    .refine((s) => s.length > 0, { error: 'must not be empty or only whitespace' })
    .refine((s) => codePointLength(s) <= MAX_NAME_LENGTH, {
      error: `must be at most ${MAX_NAME_LENGTH} characters after trimming`,
    })
    // A lone surrogate cannot be stored as UTF-8 and would come back altered.
    .refine((s) => !/\p{Cs}/u.test(s), { error: 'must be well-formed Unicode text' }),
  categoryId: z.number({ error: required('an integer') }).refine((n) => Number.isSafeInteger(n) && n >= 1, {
    error: `must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}`,
  }),
  status: z.enum(petStatuses, { error: `must be one of ${petStatuses.join(', ')}` }).default('available'),
});

/** A validated NewPet, or ApiError validation_failed naming every wrong field. */
export function parseNewPet(body: unknown): NewPet {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError('validation_failed', 'The request body must be a JSON object (a NewPet).');
  }
  const result = newPetSchema.safeParse(body);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys
        .map((key) =>
          key === 'id' ? 'id: is assigned by the service and must not be sent' : `${key}: is not a field of NewPet`,
        )
        .join('; ');
    }
    const field = issue.path.map(String).join('.') || 'body';
    return `${field}: ${issue.message}`;
  });
  throw new ApiError('validation_failed', `Invalid pet. ${problems.join('; ')}.`);
}

/** True for `application/json`, optionally with `charset=utf-8`; any other charset is refused. */
export function isJsonContentType(header: string | undefined): boolean {
  if (!header) return false;
  const [mediaType = '', ...parameters] = header.split(';');
  if (mediaType.trim().toLowerCase() !== 'application/json') return false;
  for (const parameter of parameters) {
    if (parameter.trim() === '') continue;
    const eq = parameter.indexOf('=');
    if (eq === -1) return false;
    const name = parameter.slice(0, eq).trim().toLowerCase();
    const value = parameter
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (name === 'charset' && value !== 'utf-8' && value !== 'utf8') return false;
  }
  return true;
}

function invalidParameter(message: string): ApiError {
  return new ApiError('invalid_parameter', message);
}

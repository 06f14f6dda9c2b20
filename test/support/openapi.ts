import fs from 'node:fs';
import path from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import { parse as parseYaml } from 'yaml';

/**
 * Checks real HTTP responses against openapi.yaml: status documented for the operation, content
 * type, body schema, and every header the document marks required (plus the schema of any
 * documented header that is present). Used for the bare inventory and for the gateway.
 */

export const OPENAPI_FILE = path.resolve(__dirname, '..', '..', 'openapi.yaml');
/** Base URI under which the whole document is registered with Ajv, so its `#/…` refs resolve. */
const DOCUMENT_ID = 'https://api.animalstore.example/openapi.yaml';
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type JsonObject = { [key: string]: unknown };

export interface OpenApiDocument extends JsonObject {
  openapi: string;
  paths: Record<string, JsonObject>;
  components: JsonObject;
}

/** The parts of a response the check reads; a supertest Response fits, so does a fetch result with its parsed body. */
export interface ResponseLike {
  status: number;
  headers: Headers | Record<string, string | string[] | undefined>;
  /** Parsed JSON body; `text` is parsed when this is undefined. */
  body?: unknown;
  text?: string;
}

export interface OpenApiCheckOptions {
  /**
   * Skip headers the document marks `x-set-by: gateway` (rate-limit, deprecation, Retry-After):
   * for responses of the inventory service, which sits behind the gateway that adds them.
   */
  skipGatewayHeaders?: boolean;
}

let cached: { document: OpenApiDocument; ajv: Ajv2020 } | undefined;

export function loadOpenApiDocument(): OpenApiDocument {
  return state().document;
}

function state(): { document: OpenApiDocument; ajv: Ajv2020 } {
  if (!cached) {
    const document = parseYaml(fs.readFileSync(OPENAPI_FILE, 'utf8')) as OpenApiDocument;
    // strict: false because the document is not itself a JSON Schema (openapi, paths, …).
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
    ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 31 });
    ajv.addSchema(document, DOCUMENT_ID);
    cached = { document, ajv };
  }
  return cached;
}

/** `['components', 'schemas', 'Pet']` → `#/components/schemas/Pet`, escaped for a URI fragment. */
export function toPointer(segments: readonly string[]): string {
  return '#' + segments.map((s) => '/' + encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'))).join('');
}

/** Follows a local `$ref` (`#/a/b`) to the node it names; undefined when it does not resolve. */
export function resolvePointer(document: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  const segments =
    ref === '#'
      ? []
      : ref
          .slice(2)
          .split('/')
          .map((s) => decodeURIComponent(s).replace(/~1/g, '/').replace(/~0/g, '~'));
  let node: unknown = document;
  for (const segment of segments) {
    if (typeof node !== 'object' || node === null || !(segment in node)) return undefined;
    node = (node as JsonObject)[segment];
  }
  return node;
}

/** A Reference Object's target, or the object itself. */
function deref(node: unknown): JsonObject {
  let current = node as JsonObject;
  for (let hops = 0; typeof current?.$ref === 'string' && hops < 10; hops += 1) {
    current = resolvePointer(state().document, current.$ref) as JsonObject;
  }
  return current;
}

const validators = new Map<string, ValidateFunction>();

/** Validates `value` against the schema at `pointer` in the document; returns readable problems. */
function validateAt(pointer: string, value: unknown, label: string): string[] {
  let validate = validators.get(pointer);
  if (!validate) {
    validate = state().ajv.compile({ $ref: DOCUMENT_ID + pointer });
    validators.set(pointer, validate);
  }
  if (validate(value)) return [];
  return (validate.errors ?? []).map(
    (e: ErrorObject) => `${label}${e.instancePath || ''}: ${e.message ?? 'invalid'}${describeParams(e)}`,
  );
}

function describeParams(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  if (Array.isArray(p.allowedValues)) return ` (${p.allowedValues.join(', ')})`;
  if (p.allowedValue !== undefined) return ` (${String(p.allowedValue)})`;
  if (p.additionalProperty !== undefined) return ` (${String(p.additionalProperty)})`;
  return '';
}

function headerValue(headers: ResponseLike['headers'], name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const raw = (headers as Record<string, string | string[] | undefined>)[name.toLowerCase()];
  return Array.isArray(raw) ? raw.join(', ') : raw;
}

/** supertest fills `body` only for JSON it recognised; the raw `text` is the truth when present. */
function bodyOf(response: ResponseLike): unknown {
  if (response.text === undefined || response.text === '') return response.body;
  try {
    return JSON.parse(response.text) as unknown;
  } catch {
    return response.text;
  }
}

/** Header values are strings on the wire; integer-typed headers are compared as numbers. */
function coerceHeader(value: string, schema: JsonObject | undefined): unknown {
  const type = schema ? deref(schema).type : undefined;
  if ((type === 'integer' || type === 'number') && /^-?[0-9]+(\.[0-9]+)?$/.test(value)) return Number(value);
  return value;
}

function checkAgainstResponse(
  responseDef: JsonObject,
  responsePointer: string[],
  response: ResponseLike,
  options: OpenApiCheckOptions,
): string[] {
  const problems: string[] = [];

  const headers = (responseDef.headers ?? {}) as Record<string, JsonObject>;
  for (const [name, headerRef] of Object.entries(headers)) {
    const header = deref(headerRef);
    if (options.skipGatewayHeaders && header['x-set-by'] === 'gateway') continue;
    const value = headerValue(response.headers, name);
    if (value === undefined) {
      if (header.required === true) problems.push(`header ${name}: required but missing`);
      continue;
    }
    const schemaPointer =
      typeof headerRef.$ref === 'string'
        ? `${headerRef.$ref}/schema`
        : toPointer([...responsePointer, 'headers', name, 'schema']);
    problems.push(
      ...validateAt(
        schemaPointer,
        coerceHeader(value, header.schema as JsonObject),
        `header ${name} (${JSON.stringify(value)})`,
      ),
    );
  }

  const content = responseDef.content as Record<string, JsonObject> | undefined;
  const contentType = headerValue(response.headers, 'content-type');
  const body = bodyOf(response);
  if (!content) {
    if (body !== undefined && body !== '') problems.push('body: the document describes no body for this response');
    return problems;
  }
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
  if (!mediaType || !(mediaType in content)) {
    problems.push(`content-type: ${contentType ?? '(none)'} is not one of ${Object.keys(content).join(', ')}`);
    return problems;
  }
  problems.push(...validateAt(toPointer([...responsePointer, 'content', mediaType, 'schema']), body, 'body'));
  const errorStatus = (body as { status?: unknown } | null)?.status;
  if (response.status >= 400 && typeof errorStatus === 'number' && errorStatus !== response.status) {
    problems.push(`body/status: ${errorStatus} differs from the HTTP status ${response.status}`);
  }
  return problems;
}

/** Where a response definition lives, following a `$ref` so schema pointers stay valid. */
function responseLocation(pointer: string[]): { def: JsonObject; pointer: string[] } | undefined {
  let def = resolvePointer(state().document, toPointer(pointer)) as JsonObject | undefined;
  let location = pointer;
  for (let hops = 0; def && typeof def.$ref === 'string' && hops < 10; hops += 1) {
    const ref = def.$ref;
    location = ref
      .slice(2)
      .split('/')
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    def = resolvePointer(state().document, ref) as JsonObject | undefined;
  }
  return def ? { def, pointer: location } : undefined;
}

/** Every way `response` departs from the document; empty when it conforms. */
export function openApiMismatches(
  method: string,
  pathTemplate: string,
  response: ResponseLike,
  options: OpenApiCheckOptions = {},
): string[] {
  const { document } = state();
  const pathItem = document.paths[pathTemplate];
  if (!pathItem)
    return [`path ${pathTemplate} is not in openapi.yaml (paths: ${Object.keys(document.paths).join(', ')})`];

  const verb = method.toLowerCase();
  const operationVerb = verb === 'head' && !pathItem.head ? 'get' : verb;
  const operation = pathItem[operationVerb] as JsonObject | undefined;
  if (!operation) {
    // A method the document does not define on a known path: 405 with the documented methods.
    if (response.status !== 405)
      return [
        `status ${response.status}: ${method.toUpperCase()} ${pathTemplate} is undocumented, so only 405 is expected`,
      ];
    const location = responseLocation(['components', 'responses', 'MethodNotAllowed'])!;
    const problems = checkAgainstResponse(location.def, location.pointer, response, options);
    const documented = HTTP_METHODS.filter((m) => pathItem[m]).map((m) => m.toUpperCase());
    if (documented.includes('GET') && !documented.includes('HEAD')) documented.push('HEAD');
    const allow = (headerValue(response.headers, 'allow') ?? '')
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    if ([...allow].sort().join(',') !== [...documented].sort().join(',')) {
      problems.push(`header Allow: "${allow.join(', ')}" should list exactly ${documented.join(', ')}`);
    }
    return problems;
  }

  const status = String(response.status);
  const responses = operation.responses as JsonObject;
  const key =
    status in responses
      ? status
      : `${status[0]}XX` in responses
        ? `${status[0]}XX`
        : 'default' in responses
          ? 'default'
          : undefined;
  if (!key)
    return [
      `status ${status} is not documented for ${String(operation.operationId)} (documented: ${Object.keys(responses).join(', ')})`,
    ];
  const location = responseLocation(['paths', pathTemplate, operationVerb, 'responses', key]);
  if (!location) return [`response ${key} of ${String(operation.operationId)} does not resolve`];
  const problems = checkAgainstResponse(
    location.def,
    location.pointer,
    verb === 'head' ? { ...response, body: undefined, text: '' } : response,
    options,
  );
  if (verb === 'head') return problems.filter((p) => !p.startsWith('body'));
  return problems;
}

/** Throws a readable error listing every mismatch between `response` and the document. */
export function expectMatchesOpenApi(
  method: string,
  pathTemplate: string,
  response: ResponseLike,
  options: OpenApiCheckOptions = {},
): void {
  const problems = openApiMismatches(method, pathTemplate, response, options);
  if (problems.length === 0) return;
  const body = bodyOf(response);
  const shown = JSON.stringify(body)?.slice(0, 500) ?? '(no body)';
  throw new Error(
    `${method.toUpperCase()} ${pathTemplate} → ${response.status} does not match openapi.yaml:\n` +
      problems.map((p) => `  - ${p}`).join('\n') +
      `\n  body: ${shown}`,
  );
}

/** Validates a value against `components.schemas.<name>` (e.g. an Error body of an undocumented path). */
export function expectMatchesSchema(name: string, value: unknown): void {
  const problems = validateAt(toPointer(['components', 'schemas', name]), value, name);
  if (problems.length > 0)
    throw new Error(`value does not match components.schemas.${name}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
}

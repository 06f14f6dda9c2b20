import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import {
  chunkedBody,
  contractProblems,
  describeOutcome,
  inputErrorLogLines,
  outcomeOf,
  sendRaw,
  type HeaderList,
  type RawRequestSpec,
} from './raw-http';

/**
 * Property-based bad input against the whole running product (real Redis, real inventory), over raw
 * loopback sockets. Whatever the method, path, query, headers or body, every exchange must:
 * - end (an answer, or node closing the connection for CONNECT): never a hang;
 * - never be a 5xx;
 * - carry X-Request-Id and, on a 4xx, the Error body with a CONTRACT §3 code matching the status
 *   (no answer of node's own is left: parser refusals and unknown expectations are ours too);
 * - show nothing internal in any body;
 * and a normal GET /v1/pets right after it must still be 200.
 *
 * Runs are bounded and seeded: on failure fast-check prints the counterexample with its seed and
 * path. Replay with BAD_INPUT_SEED=<seed>; widen with BAD_INPUT_RUNS=<n>.
 */

const SEED = Number(process.env.BAD_INPUT_SEED ?? 20_260_601);
const NUM_RUNS = Number(process.env.BAD_INPUT_RUNS ?? 300);
const LIMIT = 16 * 1024;

/** No anonymous 429 for the many keyless runs: the anonymous limit is not what this suite tests. */
const QUIET_ANONYMOUS_LIMIT = { anonymous: { perMinute: 1_000_000 } };

/** Bytes a client could put on the wire, minus CR and LF, which would end the line and make a different request. */
const wireByte = fc.integer({ min: 0, max: 255 }).filter((b) => b !== 0x0a && b !== 0x0d);
const wireText = (maxLength: number) =>
  fc.array(wireByte, { minLength: 1, maxLength }).map((bytes) => Buffer.from(bytes).toString('latin1'));

// ---- request lines -------------------------------------------------------------------------------

const methodArb = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom('GET', 'HEAD', 'POST') },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'PUT',
      'DELETE',
      'PATCH',
      'OPTIONS',
      'TRACE',
      'PROPFIND',
      'QUERY',
      'PURGE',
      'M-SEARCH',
      'CONNECT',
    ),
  },
  { weight: 2, arbitrary: fc.constantFrom('get', 'post', 'Get', 'hEAD', 'FOO', 'BREW', 'G ET', 'GET\t', '') },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z!#$%&'*+.^_`|~-]{1,12}$/) },
);

const segmentArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'v1',
      'pets',
      '1',
      '42',
      '0',
      '-1',
      '..',
      '.',
      '',
      '%2e%2e',
      '%2E.',
      '.%2e',
      '%2f',
      '%5c',
      '%00',
      '%ff',
      '%c0%af',
      '%e2%82',
      '%zz',
      '%',
      '..\\..',
      ';x=1',
      'PETS',
      '9'.repeat(25),
      '9007199254740991',
      '9007199254740992',
      '1e3',
      '0x1',
      '+1',
      '1.0',
      '~',
      '@',
      ':',
      'healthz',
      'readyz',
    ),
  },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 255 }).map((b) => `%${b.toString(16).padStart(2, '0')}`) },
  { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9._~!$&'()*+,;=:@-]{1,12}$/) },
  { weight: 1, arbitrary: wireText(3) },
);

const pathArb = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom('/v1/pets', '/v1/pets/1', '/v1/pets/', '/v1', '/', '*', '/v1/pets?', '/v1/pets#x'),
  },
  // One odd segment as the pet id: what the gateway forwards and the inventory must refuse cleanly.
  { weight: 3, arbitrary: segmentArb.map((segment) => `/v1/pets/${segment}`) },
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        fc.constantFrom('/', '//', '/v1/', '/v1/pets/', '/v1//', '/v1/pets/1/'),
        fc.array(segmentArb, { maxLength: 5 }),
      )
      .map(([prefix, segments]) => prefix + segments.join('/')),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 14_000 }).map((n) => '/v1/pets/' + '1'.repeat(n)) },
  { weight: 1, arbitrary: fc.integer({ min: 17_500, max: 40_000 }).map((n) => '/v1/' + 'a'.repeat(n)) },
  // Absolute form, any scheme: the gateway forwards the origin form whatever the client sent.
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom(
          'http://127.0.0.1',
          'https://pets.example',
          'http://x:1',
          'HTTP://127.0.0.1',
          'foo://x',
          'file://',
          'http://[::1',
        ),
        fc.array(segmentArb, { maxLength: 3 }),
      )
      .map(([origin, segments]) => `${origin}/v1/pets/${segments.join('/')}`),
  },
);

const queryArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '?limit[]=1',
      '?limit=1e2',
      '?limit=-1',
      '?limit=0',
      '?limit=101',
      '?limit=1&limit=2',
      '?limit=',
      '?limit',
      '?cursor=garbage',
      '?cursor=',
      '?cursor=djE6MQ&cursor=djE6MQ',
      '?status=sold&status=sold',
      '?status=SOLD',
      '?status[]=sold',
      '?%',
      '?&&&',
      '?limit=%ff',
      '?__proto__=1',
      '?limit=%31',
    ),
  },
  {
    weight: 4,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.constantFrom('limit', 'status', 'cursor', 'limit[]', 'status[x]', '%6cimit', 'x', ''),
          fc.oneof(
            fc.integer({ min: -5, max: 200 }).map(String),
            fc.constantFrom(
              'available',
              'pending',
              'sold',
              '',
              '%00',
              '%ff',
              '1e2',
              '1.5',
              'djE6MQ',
              'djE6MA',
              'garbage',
              '+1',
              '%2B1',
            ),
            fc.stringMatching(/^[A-Za-z0-9%._~-]{0,20}$/),
          ),
        ),
        { minLength: 1, maxLength: 4 },
      )
      .map((pairs) => '?' + pairs.map(([name, value]) => `${name}=${value}`).join('&')),
  },
);

// ---- headers -------------------------------------------------------------------------------------

/** An Authorization set-up, given this run's valid key. */
type AuthHeaders = (key: string) => HeaderList;

const authArb: fc.Arbitrary<AuthHeaders> = fc.oneof(
  { weight: 6, arbitrary: fc.constant((key: string) => [['Authorization', `Bearer ${key}`]] as const) },
  { weight: 1, arbitrary: fc.constant(() => []) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('', ' ', '\t'),
        fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Bearer:', 'Token', 'Basic'),
        fc.constantFrom('', ' ', '  ', '\t', ' \t '),
        fc.constantFrom('', ' ', ' \t'),
      )
      .map(
        ([lead, scheme, gap, trail]) =>
          (key: string) =>
            [['Authorization', `${lead}${scheme}${gap}${key}${trail}`]] as const,
      ),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('asg_live_', 'asg_test_', 'asg_prod_', 'ASG_DEV_', 'asg_dev', '')
      .map(
        (prefix) => (key: string) => [['Authorization', `Bearer ${prefix}${key.slice('asg_dev_'.length)}`]] as const,
      ),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: -12, max: 12 }).map((delta) => (key: string) => {
      const changed = delta < 0 ? key.slice(0, delta) : key + 'A'.repeat(delta);
      return [['Authorization', `Bearer ${changed}`]] as const;
    }),
  },
  {
    weight: 2,
    arbitrary: fc
      .array(fc.constantFrom('valid', 'invalid', 'empty', 'other-environment'), { minLength: 2, maxLength: 4 })
      .map(
        (kinds) => (key: string) =>
          kinds.map((kind) => {
            const value = {
              valid: `Bearer ${key}`,
              invalid: 'Bearer asg_dev_0000000000000000000000',
              empty: '',
              'other-environment': `Bearer asg_live_${key.slice(8)}`,
            }[kind];
            return ['Authorization', value] as const;
          }),
      ),
  },
  {
    weight: 1,
    arbitrary: fc
      .oneof(fc.integer({ min: 500, max: 14_000 }), fc.integer({ min: 17_500, max: 30_000 }))
      .map((n) => () => [['Authorization', 'Bearer ' + 'k'.repeat(n)]] as const),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(wireText(3), fc.nat()).map(([inserted, at]) => (key: string) => {
      const valid = `Bearer ${key}`;
      const position = at % (valid.length + 1);
      return [
        ['Authorization', Buffer.from(valid.slice(0, position) + inserted + valid.slice(position), 'latin1')],
      ] as const;
    }),
  },
);

const extraHeaderArb: fc.Arbitrary<HeaderList> = fc.oneof(
  fc
    .tuple(fc.constant('X-Request-Id'), fc.oneof(wireText(40), fc.stringMatching(/^[A-Za-z0-9._:-]{1,200}$/)))
    .map((h) => [h]),
  fc
    .tuple(
      fc.constant('X-Forwarded-For'),
      fc.oneof(wireText(40), fc.constantFrom('127.0.0.1', '::1, 10.0.0.1', 'garbage', ', ,', '999.1.1.1')),
    )
    .map((h) => [h]),
  fc
    .tuple(
      fc.constantFrom(
        'Host',
        'Content-Type',
        'Accept',
        'Cookie',
        'Forwarded',
        'X-Gateway-Token',
        'X-Real-Ip',
        'Proxy-Authorization',
      ),
      wireText(40),
    )
    .map((h) => [h]),
  fc
    .tuple(
      fc.constant('Connection'),
      fc.constantFrom(
        'close',
        'keep-alive',
        'close, authorization',
        'close, host, x-request-id',
        'Upgrade',
        'close, content-length',
      ),
    )
    .map((h) => [h]),
  fc.tuple(fc.constant('Upgrade'), fc.constantFrom('websocket', 'h2c', 'garbage')).map((h) => [h]),
  fc
    .oneof(fc.integer({ min: 100, max: 14_000 }), fc.integer({ min: 17_500, max: 30_000 }))
    .map((n) => [['X-Pad', 'p'.repeat(n)] as const]),
  // Many small headers: up to 2,500, past node's default count limits.
  fc
    .oneof(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 400, max: 2500 }))
    .map((n) => Array.from({ length: n }, (_, i) => [`X-H${i}`, 'v'] as const)),
  fc.tuple(fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/), wireText(20)).map((h) => [h]),
);

// ---- bodies of POST /v1/pets ---------------------------------------------------------------------

const nameArb = fc.oneof(
  fc.string({ maxLength: 220 }),
  fc.string({ unit: 'grapheme', maxLength: 205 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom('', '   ', '\u0000', '\ud800', 'Rex'),
  fc.integer(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
);
const categoryIdArb = fc.oneof(
  fc.integer({ min: -5, max: 10 }),
  fc.double(),
  fc.constantFrom(2 ** 53, 2 ** 53 - 1, -0, 1.5, 1e308),
  fc.string({ maxLength: 5 }),
  fc.constant(null),
  fc.boolean(),
);
const newPetishArb = fc
  .record(
    {
      name: nameArb,
      categoryId: categoryIdArb,
      status: fc.oneof(fc.constantFrom('available', 'pending', 'sold'), fc.string({ maxLength: 10 })),
      id: fc.integer(),
      owner: fc.anything({ maxDepth: 2 }),
    },
    { requiredKeys: [] },
  )
  .map((fields) => JSON.stringify(fields) ?? 'null');

/** A valid NewPet, so that some runs go all the way to a row in SQLite. */
const validPetArb = fc
  .record(
    {
      name: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200 }).filter((name) => name.trim().length > 0),
      categoryId: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      status: fc.constantFrom('available', 'pending', 'sold'),
    },
    { requiredKeys: ['name', 'categoryId'] },
  )
  .map((pet) => JSON.stringify(pet));

const bodyTextArb: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 3, arbitrary: validPetArb.map((s) => Buffer.from(s)) },
  { weight: 4, arbitrary: newPetishArb.map((s) => Buffer.from(s)) },
  { weight: 2, arbitrary: fc.json({ maxDepth: 4 }).map((s) => Buffer.from(s)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 9000 }), fc.constantFrom(['[', ']'], ['{"a":', '}'], ['{"name":', '}']))
      .map(([depth, [open, close]]) => Buffer.from(open!.repeat(depth) + '1' + close!.repeat(depth))),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 15_000, max: 70_000 })
      .map((n) => Buffer.from(JSON.stringify({ name: 'n'.repeat(n), categoryId: 1 }))),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.constantFrom(
          '{',
          '{"name":',
          "{'name':'Rex'}",
          'NaN',
          '[1,]',
          '{"name":"Rex","categoryId":1}}',
          '/* */{}',
          '',
          ' ',
          'nul',
          '"',
        ),
        fc.string({ unit: 'binary', maxLength: 100 }),
      )
      .map((s) => Buffer.from(s)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)) },
);

const contentTypeArb = fc.oneof(
  { weight: 5, arbitrary: fc.constant<string | null>('application/json') },
  { weight: 1, arbitrary: fc.constant<string | null>(null) },
  {
    weight: 3,
    arbitrary: fc.constantFrom<string | null>(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json; charset="UTF-8"',
      'application/json; charset=latin1',
      'application/json;;',
      'application/json; charset',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json-patch+json',
      'multipart/form-data; boundary=x',
      '*/*',
      '',
    ),
  },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z]{1,10}\/[a-z+.-]{1,15}(; ?[a-z]{1,8}=[a-z0-9-]{0,10})?$/) },
);

type Framing = 'length' | 'chunked' | 'declared-over-limit' | 'gzip' | 'unknown-encoding';
const framingArb = fc.constantFrom<Framing>(
  'length',
  'length',
  'chunked',
  'declared-over-limit',
  'gzip',
  'unknown-encoding',
);

function framedBody(body: Buffer, framing: Framing, pieceSize: number): { headers: HeaderList; body: Buffer } {
  switch (framing) {
    case 'length':
      return { headers: [['Content-Length', String(body.length)]], body };
    case 'chunked': {
      const pieces: Buffer[] = [];
      for (let at = 0; at < body.length; at += pieceSize) pieces.push(body.subarray(at, at + pieceSize));
      return { headers: [['Transfer-Encoding', 'chunked']], body: chunkedBody(pieces) };
    }
    case 'declared-over-limit':
      // The declared length alone is over the limit; the bytes sent may be fewer (the gateway answers before reading).
      return { headers: [['Content-Length', String(Math.max(body.length, LIMIT + 1 + pieceSize))]], body };
    case 'gzip': {
      const compressed = gzipSync(body);
      return {
        headers: [
          ['Content-Encoding', 'gzip'],
          ['Content-Length', String(compressed.length)],
        ],
        body: compressed,
      };
    }
    case 'unknown-encoding':
      return {
        headers: [
          ['Content-Encoding', 'x-unknown'],
          ['Content-Length', String(body.length)],
        ],
        body,
      };
  }
}

// ---- the properties ------------------------------------------------------------------------------

describe.each(['undici', 'http-proxy'] as const)('bad input properties through the %s forwarder', (forwarder) => {
  let product: ProductHarness;
  let key: string;
  /** Per property, how many runs ended each way (gateway, node, closed, hang). */
  const outcomes = new Map<string, Map<string, number>>();

  beforeAll(async () => {
    product = await startTestProduct({ overrides: { ...QUIET_ANONYMOUS_LIMIT, upstream: { forwarder } } });
    key = (
      await product.keyService.create({
        name: 'bad input property',
        plan: 'enterprise',
        limits: { perMinute: 1_000_000, perDay: 10_000_000 },
      })
    ).key;
  });

  afterAll(async () => {
    await product?.close();
  });

  /** One run: send the input, check the exchange, then check a normal GET still works. */
  async function check(spec: RawRequestSpec, label: string): Promise<void> {
    const exchange = await sendRaw(product.gatewayUrl, spec, { timeoutMs: 5000 });
    const outcome = outcomeOf(exchange);
    const counts = outcomes.get(label) ?? new Map<string, number>();
    counts.set(outcome.kind, (counts.get(outcome.kind) ?? 0) + 1);
    outcomes.set(label, counts);
    const problems = contractProblems(exchange, {
      head: spec.method === 'HEAD',
      forbidden: [product.dataDir, process.cwd()],
      mayCloseWithoutAnswer: spec.method === 'CONNECT',
    });
    const after = await sendRaw(product.gatewayUrl, {
      method: 'GET',
      target: '/v1/pets?limit=1',
      headers: [['Authorization', `Bearer ${key}`]],
    });
    if (after.response?.status !== 200)
      problems.push(`a normal GET /v1/pets afterwards got ${describeOutcome(outcomeOf(after))}`);
    if (problems.length > 0) throw new Error(`${describeOutcome(outcome)}\n${problems.join('\n')}`);
  }

  /** How many runs of `label` our own code answered (rather than node:http refusing them). */
  function gatewayAnswered(label: string): number {
    return outcomes.get(label)?.get('gateway') ?? 0;
  }

  const params = { numRuns: NUM_RUNS, seed: SEED };

  it("any method, path and query string: never 5xx, always the contract's answer", async () => {
    await fc.assert(
      fc.asyncProperty(methodArb, pathArb, queryArb, async (method, path, query) => {
        await check({ method, target: path + query, headers: [['Authorization', `Bearer ${key}`]] }, 'request line');
      }),
      params,
    );
    // The inputs reached the gateway's own code in a good share of runs, not only node's parser.
    expect(gatewayAnswered('request line')).toBeGreaterThan(NUM_RUNS / 3);
  }, 120_000);

  it("any Authorization and other headers: never 5xx, always the contract's answer", async () => {
    await fc.assert(
      fc.asyncProperty(
        // Mostly requests the gateway forwards, where the inventory sees what the gateway passes on.
        fc.constantFrom('GET', 'GET', 'GET', 'HEAD', 'DELETE'),
        fc.constantFrom('/v1/pets', '/v1/pets', '/v1/pets/1', '/v1/owners', '/elsewhere'),
        authArb,
        fc.array(extraHeaderArb, { maxLength: 3 }),
        async (method, target, auth, extras) => {
          await check({ method, target, headers: [...auth(key), ...extras.flat()] }, 'headers');
        },
      ),
      params,
    );
    expect(gatewayAnswered('headers')).toBeGreaterThan(NUM_RUNS / 3);
  }, 120_000);

  it("any body, content type and framing for POST /v1/pets: never 5xx, always the contract's answer", async () => {
    await fc.assert(
      fc.asyncProperty(
        bodyTextArb,
        contentTypeArb,
        framingArb,
        fc.integer({ min: 1, max: 4096 }),
        async (body, contentType, framing, pieceSize) => {
          const framed = framedBody(body, framing, pieceSize);
          const headers: HeaderList = [
            ['Authorization', `Bearer ${key}`],
            ...(contentType === null ? [] : ([['Content-Type', contentType]] as const)),
            ...framed.headers,
          ];
          await check({ method: 'POST', target: '/v1/pets', headers, body: framed.body }, 'body');
        },
      ),
      params,
    );
    expect(gatewayAnswered('body')).toBeGreaterThan(NUM_RUNS / 2);
  }, 120_000);

  it('afterwards the gateway still serves GET /v1/pets with 200 and has logged nothing at error level', async () => {
    const exchange = await sendRaw(product.gatewayUrl, {
      method: 'GET',
      target: '/v1/pets',
      headers: [['Authorization', `Bearer ${key}`]],
    });
    expect(exchange.response?.status).toBe(200);
    expect(inputErrorLogLines(product.logs.lines)).toEqual([]);
  });
});

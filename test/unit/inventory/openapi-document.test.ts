import { codeToStatus, otherStatusesOf } from '../../../src/shared/errors';
import { loadOpenApiDocument, openApiMismatches, resolvePointer, expectMatchesOpenApi } from '../../support/openapi';

type Node = { [key: string]: unknown };
const doc = loadOpenApiDocument();

function deref(node: unknown): Node {
  let current = node as Node;
  while (typeof current.$ref === 'string') current = resolvePointer(doc, current.$ref) as Node;
  return current;
}

function collectRefs(node: unknown, at: string, found: Array<{ at: string; ref: string }>): void {
  if (Array.isArray(node)) node.forEach((child, i) => collectRefs(child, `${at}/${i}`, found));
  else if (typeof node === 'object' && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.push({ at, ref: value });
      else collectRefs(value, `${at}/${key}`, found);
    }
  }
}

const operations = [
  {
    path: '/pets',
    method: 'get',
    operationId: 'listPets',
    statuses: ['200', '400', '401', '403', '429', '500', '502', '503', '504'],
  },
  {
    path: '/pets',
    method: 'post',
    operationId: 'createPet',
    statuses: ['201', '400', '401', '403', '413', '415', '429', '500', '502', '503', '504'],
  },
  {
    path: '/pets/{petId}',
    method: 'get',
    operationId: 'getPet',
    statuses: ['200', '400', '401', '403', '404', '410', '429', '500', '502', '503', '504'],
  },
  // Answered by the gateway: nothing is forwarded, so no 502 or 504.
  { path: '/usage', method: 'get', operationId: 'getUsage', statuses: ['200', '401', '429', '500', '503'] },
] as const;

const rateLimitHeaders = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit-Policy',
  'RateLimit',
];

function operation(path: string, method: string): Node {
  return (doc.paths[path] as Node)[method] as Node;
}

function responsesOf(path: string, method: string): Array<[string, Node]> {
  return Object.entries(operation(path, method).responses as Node).map(([status, r]) => [status, deref(r)]);
}

describe('openapi.yaml', () => {
  it('is OpenAPI 3.1.0 with the production and staging servers and bearer security', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect((doc.info as Node).version).toBe('1.0.0');
    expect((doc.servers as Node[]).map((s) => s.url)).toEqual([
      'https://api.animalstore.example/v1',
      'https://staging-api.animalstore.example/v1',
    ]);
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect((doc.components.securitySchemes as Node).bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('resolves every $ref', () => {
    const refs: Array<{ at: string; ref: string }> = [];
    collectRefs(doc, '#', refs);
    expect(refs.length).toBeGreaterThan(50);
    const broken = refs.filter(({ ref }) => resolvePointer(doc, ref) === undefined);
    expect(broken).toEqual([]);
  });

  it('defines exactly the five operations, getPet deprecated', () => {
    const ids = Object.values(doc.paths).flatMap((item) =>
      Object.values(item as Node).filter((v): v is Node => typeof v === 'object' && v !== null && 'operationId' in v),
    );
    expect(ids.map((op) => op.operationId).sort()).toEqual([
      'createPet',
      'getPet',
      'getUsage',
      'listPets',
      'revokeKey',
    ]);
    expect(operation('/pets/{petId}', 'get').deprecated).toBe(true);
    expect(operation('/pets', 'get').deprecated).toBeUndefined();
  });

  it.each(operations)(
    '$operationId documents the statuses it can answer',
    ({ path, method, operationId, statuses }) => {
      expect(operation(path, method).operationId).toBe(operationId);
      expect(Object.keys(operation(path, method).responses as Node).sort()).toEqual([...statuses].sort());
    },
  );

  it.each(operations)(
    '$operationId: every response is JSON, carries X-Request-Id and the rate-limit headers',
    ({ path, method }) => {
      for (const [status, response] of responsesOf(path, method)) {
        const headers = response.headers as Node;
        // A 403 of an access policy is decided before any limit: nothing counted, no rate-limit headers (CONTRACT §4).
        for (const name of status === '403' ? ['X-Request-Id'] : ['X-Request-Id', ...rateLimitHeaders]) {
          expect({ status, name, required: deref(headers[name]).required }).toEqual({ status, name, required: true });
        }
        expect(Object.keys(response.content as Node)).toEqual(['application/json']);
        if (status === '429') expect(deref(headers['Retry-After']).required).toBe(true);
      }
    },
  );

  it('revokeKey answers 204 without a body, or the errors every operation documents', () => {
    expect(operation('/keys/revoke', 'post').operationId).toBe('revokeKey');
    const responses = responsesOf('/keys/revoke', 'post');
    expect(responses.map(([status]) => status).sort()).toEqual(['204', '401', '429', '500', '503']);
    const [, noContent] = responses.find(([status]) => status === '204')!;
    expect(noContent.content).toBeUndefined();
    expect(deref((noContent.headers as Node)['X-Request-Id']).required).toBe(true);
    for (const [status, response] of responses)
      if (status !== '204') expect(Object.keys(response.content as Node)).toEqual(['application/json']);
  });

  it('getPet: every response carries Deprecation, Sunset and the deprecation Link', () => {
    for (const [status, response] of responsesOf('/pets/{petId}', 'get')) {
      const headers = response.headers as Node;
      for (const name of ['Deprecation', 'Sunset', 'Link']) {
        expect({ status, name, required: deref(headers[name]).required }).toEqual({ status, name, required: true });
      }
    }
  });

  it('createPet 201 carries Location; listPets 200 documents the optional next Link', () => {
    const created = deref((operation('/pets', 'post').responses as Node)['201']);
    expect(deref((created.headers as Node).Location).required).toBe(true);
    const listed = deref((operation('/pets', 'get').responses as Node)['200']);
    expect(deref((listed.headers as Node).Link).required).toBe(false);
  });

  it('listPets takes limit (1..100, default 20), status and cursor', () => {
    const params = (operation('/pets', 'get').parameters as Node[]).map(deref);
    expect(params.map((p) => `${String(p.in)}:${String(p.name)}`)).toEqual([
      'query:limit',
      'query:status',
      'query:cursor',
    ]);
    expect(params[0]!.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
  });

  it('has the Pet, NewPet, PetStatus, Pets and Error schemas; NewPet refuses unknown fields', () => {
    const schemas = doc.components.schemas as Node;
    for (const name of ['Pet', 'NewPet', 'PetStatus', 'Pets', 'Error']) expect(schemas[name]).toBeDefined();
    expect((schemas.NewPet as Node).additionalProperties).toBe(false);
    expect((schemas.NewPet as Node).required).toEqual(['name', 'categoryId']);
    expect((schemas.PetStatus as Node).enum).toEqual(['available', 'pending', 'sold']);
  });

  it('Error.code lists exactly the codes of src/shared/errors.ts', () => {
    const code = ((doc.components.schemas as Node).Error as Node).properties as Node;
    expect([...((code.code as Node).enum as string[])].sort()).toEqual(Object.keys(codeToStatus).sort());
  });

  it('each error response narrows the code to ones that map to its HTTP status', () => {
    for (const { path, method } of operations) {
      for (const [status, response] of responsesOf(path, method)) {
        if (Number(status) < 400) continue;
        const schema = deref(((response.content as Node)['application/json'] as Node).schema);
        const narrowed = (schema.allOf as Node[])[1]!.properties as Node;
        const codes = ((narrowed.code as Node).enum as string[] | undefined) ?? [
          (narrowed.code as Node).const as string,
        ];
        expect((narrowed.status as Node).const).toBe(Number(status));
        for (const code of codes) {
          const statuses = [
            codeToStatus[code as keyof typeof codeToStatus],
            ...(otherStatusesOf[code as keyof typeof codeToStatus] ?? []),
          ];
          expect({ code, status: statuses.includes(Number(status)) }).toEqual({ code, status: true });
        }
      }
    }
  });
});

describe('the OpenAPI response checker', () => {
  const pet = { id: 1, name: 'Rex', categoryId: 2, status: 'available' };
  const gatewayHeaders = {
    'x-request-id': 'abc',
    'x-ratelimit-limit': '60',
    'x-ratelimit-remaining': '59',
    'x-ratelimit-reset': '1767225660',
    'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
    ratelimit: '"minute";r=59;t=42',
    'content-type': 'application/json; charset=utf-8',
  };
  const deprecation = {
    deprecation: '@1764892800',
    sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
    link: '</v1/pets>; rel="successor-version", <https://docs.animalstore.example/deprecations/get-pet>; rel="deprecation"',
  };

  it('accepts a conforming gateway response', () => {
    expect(() =>
      expectMatchesOpenApi('GET', '/pets/{petId}', {
        status: 200,
        headers: { ...gatewayHeaders, ...deprecation },
        body: pet,
      }),
    ).not.toThrow();
  });

  it('works with fetch Headers as well as plain objects', () => {
    expect(
      openApiMismatches('GET', '/pets', { status: 200, headers: new Headers(gatewayHeaders), body: [pet] }),
    ).toEqual([]);
  });

  it('flags a body that breaks the schema, naming the field', () => {
    const problems = openApiMismatches('GET', '/pets/{petId}', {
      status: 200,
      headers: { ...gatewayHeaders, ...deprecation },
      body: { ...pet, id: 'x' },
    });
    expect(problems.join('\n')).toContain('body/id');
  });

  it('flags an undocumented status and a wrong error code for the status', () => {
    expect(openApiMismatches('GET', '/pets', { status: 404, headers: gatewayHeaders, body: {} }).join()).toContain(
      'not documented',
    );
    const wrongCode = { code: 'not_found', message: 'x', status: 401 };
    expect(
      openApiMismatches('GET', '/pets', { status: 401, headers: gatewayHeaders, body: wrongCode }).join(),
    ).toContain('body/code');
  });

  it('requires the gateway headers unless told to skip them, and always requires X-Request-Id', () => {
    const bare = { 'content-type': 'application/json', 'x-request-id': 'abc' };
    const withoutGateway = openApiMismatches('GET', '/pets/{petId}', { status: 200, headers: bare, body: pet });
    expect(withoutGateway).toEqual(
      expect.arrayContaining(['header X-RateLimit-Limit: required but missing', 'header Sunset: required but missing']),
    );
    expect(
      openApiMismatches(
        'GET',
        '/pets/{petId}',
        { status: 200, headers: bare, body: pet },
        { skipGatewayHeaders: true },
      ),
    ).toEqual([]);
    expect(
      openApiMismatches(
        'GET',
        '/pets/{petId}',
        { status: 200, headers: { 'content-type': 'application/json' }, body: pet },
        { skipGatewayHeaders: true },
      ),
    ).toEqual(['header X-Request-Id: required but missing']);
  });

  it('checks header values against their schemas', () => {
    const problems = openApiMismatches('GET', '/pets', {
      status: 200,
      headers: { ...gatewayHeaders, 'x-ratelimit-remaining': 'many' },
      body: [],
    });
    expect(problems.join()).toContain('X-RateLimit-Remaining');
  });

  it('expects 405 with exactly the documented methods in Allow for an undocumented method', () => {
    const body = { code: 'method_not_allowed', message: 'x', status: 405 };
    expect(
      openApiMismatches('DELETE', '/pets', {
        status: 405,
        headers: { ...gatewayHeaders, allow: 'GET, HEAD, POST' },
        body,
      }),
    ).toEqual([]);
    expect(
      openApiMismatches('DELETE', '/pets', { status: 405, headers: { ...gatewayHeaders, allow: 'GET' }, body }).join(),
    ).toContain('Allow');
    expect(openApiMismatches('DELETE', '/pets', { status: 200, headers: gatewayHeaders, body: [] }).join()).toContain(
      'only 405',
    );
  });

  it('throws a readable error listing the mismatches', () => {
    expect(() => expectMatchesOpenApi('POST', '/pets', { status: 201, headers: gatewayHeaders, body: pet })).toThrow(
      /POST \/pets → 201[\s\S]*header Location: required but missing/,
    );
  });
});

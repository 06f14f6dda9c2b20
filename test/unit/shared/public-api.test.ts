import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { deprecatedOperationId, OPERATIONS, operationAt, operationNames } from '../../../src/shared/public-api';
import { OPENAPI_FILE } from '../../support/openapi';

describe('deprecatedOperationId', () => {
  it('is the method and the route template with the base path, the one id of an operation', () => {
    expect(deprecatedOperationId('GET', '/v1/pets/{petId}')).toBe('GET /v1/pets/{petId}');
    expect(deprecatedOperationId('POST', '/v1/pets')).toBe('POST /v1/pets');
  });

  it('files HEAD with GET', () => {
    expect(deprecatedOperationId('HEAD', '/v1/pets/{petId}')).toBe('GET /v1/pets/{petId}');
  });
});

describe('the operation table', () => {
  const doc = parseYaml(fs.readFileSync(OPENAPI_FILE, 'utf8')) as {
    paths: Record<string, Record<string, { operationId?: string }>>;
  };

  it('holds every operation of openapi.yaml, by its id, method and path, and nothing else', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([, operation]) => operation?.operationId)
        .map(([method, operation]) => `${operation.operationId} ${method.toUpperCase()} ${path}`),
    );
    expect(OPERATIONS.map((row) => `${row.id} ${row.method} ${row.path}`).sort()).toEqual(documented.sort());
  });

  it('finds a row by method and path, HEAD by GET, and names each row as config does', () => {
    expect(operationAt('GET', '/pets/{petId}')?.id).toBe('getPet');
    expect(operationAt('HEAD', '/pets')?.id).toBe('listPets');
    expect(operationAt('DELETE', '/pets/{petId}')).toBeUndefined();
    expect(operationAt('GET', '/v1/pets')).toBeUndefined();
    expect(operationNames()).toBe('GET /pets, POST /pets, GET /pets/{petId}, GET /usage, POST /keys/revoke');
  });
});

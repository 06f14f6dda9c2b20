import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { operationIdOf, POLICY_OPERATION_IDS } from '../../../src/access/operation-ids';
import { matchRoute } from '../../../src/gateway/operations/routes';
import { OPENAPI_FILE } from '../../support/openapi';

type Paths = Record<string, Record<string, { operationId?: string }>>;

describe('operation ids', () => {
  const doc = parseYaml(fs.readFileSync(OPENAPI_FILE, 'utf8')) as { servers?: Array<{ url: string }>; paths: Paths };

  it('every listable id is an operation of openapi.yaml, and the request it names maps back to it', () => {
    const found = new Map<string, { method: string; path: string }>();
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (operation?.operationId) found.set(operation.operationId, { method: method.toUpperCase(), path });
      }
    }
    for (const id of POLICY_OPERATION_IDS) {
      const where = found.get(id);
      expect(where).toBeDefined();
      const concrete = `/v1${where!.path}`.replace('{petId}', '7');
      expect(operationIdOf(where!.method, matchRoute(concrete)?.template)).toBe(id);
    }
    // Every operation of the document but the gateway's own answers (usage, a key revoking itself) can be listed.
    expect([...found.keys()].filter((id) => !(POLICY_OPERATION_IDS as readonly string[]).includes(id)).sort()).toEqual([
      'getUsage',
      'revokeKey',
    ]);
  });

  it('HEAD names the GET operation; unknown methods, routes and the usage answer name none', () => {
    expect(operationIdOf('HEAD', '/v1/pets')).toBe('listPets');
    expect(operationIdOf('HEAD', '/v1/pets/{petId}')).toBe('getPet');
    expect(operationIdOf('DELETE', '/v1/pets/{petId}')).toBeNull();
    expect(operationIdOf('GET', '/v1/usage')).toBeNull();
    expect(operationIdOf('POST', '/v1/keys/revoke')).toBeNull();
    expect(operationIdOf('GET', undefined)).toBeNull();
  });
});

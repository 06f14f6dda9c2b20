import { compileAccessPolicy } from '../../../../src/access/access-policy';
import { matchRoute } from '../../../../src/gateway/operations/routes';
import { createAccessStep } from '../../../../src/gateway/steps/check-access';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import type { ApiKeyRecord } from '../../../../src/keys/types';
import { counted, countedInAll, gatewayRequest, incoming, keyRecord, stepEnvironment } from './step-kit';

function setUp(consumerPolicy?: Parameters<typeof createAccessStep>[0]['consumerPolicy']) {
  const env = stepEnvironment();
  const checkAccess = createAccessStep({ metrics: env.metrics, logger: env.logger, consumerPolicy });
  const call = (method: string, path: string, key: ApiKeyRecord | null, clientAddress = '203.0.113.7') => {
    const request = gatewayRequest(incoming(method, path), {
      route: matchRoute(path),
      key,
      keyId: key?.id ?? null,
      plan: key?.plan ?? 'anonymous',
      clientAddress,
    });
    return { outcome: checkAccess(request), request };
  };
  return { ...env, call };
}

describe('check-access step', () => {
  it('lets every request of a key without lists through, and counts nothing', async () => {
    const { call, metrics } = setUp();
    expect(call('POST', '/v1/pets', keyRecord()).outcome).toBe(CONTINUE);
    expect(await countedInAll(metrics.accessDenied)).toBe(0);
  });

  it('refuses an operation outside the list with 403 operation_not_allowed, counted and logged with the key id', async () => {
    const { call, metrics, lines } = setUp();
    const key = keyRecord({ allowedOperations: ['listPets'] });
    expect(call('GET', '/v1/pets', key).outcome).toBe(CONTINUE);
    const { outcome } = call('POST', '/v1/pets', key);
    expect(outcome).toBeInstanceOf(Refusal);
    expect((outcome as Refusal).code).toBe('operation_not_allowed');
    expect(await counted(metrics.accessDenied, { reason: 'operation', plan: key.plan })).toBe(1);
    expect(lines().find((line) => line.msg === 'request refused by access policy')).toMatchObject({
      keyId: key.id,
      reason: 'operation',
      operationId: 'createPet',
    });
  });

  it('refuses an address outside the list with 403 address_not_allowed', async () => {
    const { call, metrics } = setUp();
    const key = keyRecord({ allowedAddresses: ['10.0.0.0/8'] });
    expect((call('GET', '/v1/pets', key, '127.0.0.1').outcome as Refusal).code).toBe('address_not_allowed');
    expect(call('GET', '/v1/pets', key, '10.9.8.7').outcome).toBe(CONTINUE);
    expect(await counted(metrics.accessDenied, { reason: 'address', plan: key.plan })).toBe(1);
  });

  it('always allows GET /v1/usage, and leaves keyless callers to the anonymous limit', () => {
    const { call } = setUp();
    const key = keyRecord({ allowedOperations: ['getPet'], allowedAddresses: ['10.0.0.0/8'] });
    expect(call('GET', '/v1/usage', key, '127.0.0.1').outcome).toBe(CONTINUE);
    expect(call('POST', '/v1/pets', null).outcome).toBe(CONTINUE);
  });

  it("combines the key's policy with its consumer's: both must allow", () => {
    const consumer = compileAccessPolicy({ allowedOperations: ['listPets'] });
    const { call } = setUp((record) => (record.consumerId === 'con_policy' ? consumer : null));
    const key = keyRecord({ consumerId: 'con_policy', allowedAddresses: ['203.0.113.0/24'] });
    expect(call('GET', '/v1/pets', key).outcome).toBe(CONTINUE);
    expect((call('GET', '/v1/pets/7', key).outcome as Refusal).code).toBe('operation_not_allowed');
    expect((call('GET', '/v1/pets', key, '198.51.100.1').outcome as Refusal).code).toBe('address_not_allowed');
    // A key without lists of its own still meets its consumer's.
    expect((call('POST', '/v1/pets', keyRecord({ consumerId: 'con_policy' })).outcome as Refusal).code).toBe(
      'operation_not_allowed',
    );
  });
});

import { isRedisUnavailable, StoreUnreachableError } from '../../../../src/shared/redis/redis-failures';
import { toApiError } from '../../../../src/shared/errors';

/** Which errors mean "the store cannot be reached now" (503 on the admin API) and which stay faults (500). */
describe('isRedisUnavailable', () => {
  const errno = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:6379`), { code });

  test.each([
    ["Stream isn't writeable and enableOfflineQueue options is false"],
    ['Connection is closed.'],
    ['Command timed out'],
    ['All sentinels are unreachable. Retrying from scratch after 50ms.'],
    ["READONLY You can't write against a read only replica."],
    ['LOADING Redis is loading the dataset in memory'],
    ['MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no.'],
  ])('%s: unreachable', (message) => {
    expect(isRedisUnavailable(new Error(message))).toBe(true);
  });

  test('connection errors by code', () => {
    expect(isRedisUnavailable(errno('ECONNREFUSED'))).toBe(true);
    expect(isRedisUnavailable(errno('ECONNRESET'))).toBe(true);
  });

  test('a fault of the command or the code is not an outage', () => {
    expect(isRedisUnavailable(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe(
      false,
    );
    expect(isRedisUnavailable(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBe(false);
    expect(isRedisUnavailable('Connection is closed.')).toBe(false);
    expect(isRedisUnavailable(null)).toBe(false);
  });

  test('answered 503 service_unavailable with Retry-After, the contract Error code', () => {
    const apiError = toApiError(new StoreUnreachableError('Connection is closed.'));
    expect([apiError.status, apiError.code, apiError.headers['Retry-After']]).toEqual([
      503,
      'service_unavailable',
      '1',
    ]);
  });
});

import type { KeyResolution } from '../../../../src/keys/key-resolver';
import { createAuthenticateStep, type KeyLookup } from '../../../../src/gateway/steps/authenticate';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import { counted, countedInAll, gatewayRequest, incoming, keyRecord, stepEnvironment } from './step-kit';

const REALM = 'Bearer realm="animal-store"';
const PRESENTED = 'asg_test_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';
const record = keyRecord({ plan: 'pro' });

/** A key lookup that answers one fixed resolution, or fails as an unreachable store does. */
function lookup(answer: KeyResolution | Error): KeyLookup & { resolve: jest.Mock } {
  return {
    resolve: jest.fn(async () => {
      if (answer instanceof Error) throw answer;
      return answer;
    }),
  };
}

function setUp(answer: KeyResolution | Error = { status: 'valid', record }) {
  const env = stepEnvironment();
  const keys = lookup(answer);
  const authenticate = createAuthenticateStep({ keyResolver: keys, metrics: env.metrics, storeCall: env.storeCall });
  return { ...env, keys, authenticate };
}

const withAuthorization = (...values: string[]) =>
  incoming('GET', '/v1/pets', [['Host', 'gw.example'], ...values.map((v) => ['Authorization', v] as const)]);

/** Authenticates a request carrying these headers: what it answered, and the request as it stands after. */
async function authenticated(
  authenticate: ReturnType<typeof setUp>['authenticate'],
  req = withAuthorization(`Bearer ${PRESENTED}`),
) {
  const request = gatewayRequest(req);
  const outcome = await authenticate(request);
  return { outcome, request };
}

const keyless = (refusal: Refusal, known = false, neverIssued = false) => ({ refusal, known, neverIssued });

describe('authenticate step', () => {
  it('a request without Authorization goes on keyless, with missing_api_key and the bare challenge', async () => {
    const { authenticate, keys, metrics } = setUp();
    const { outcome, request } = await authenticated(
      authenticate,
      incoming('GET', '/v1/pets', [['Host', 'gw.example']]),
    );
    expect(outcome).toBe(CONTINUE);
    expect(request.keyless).toEqual(
      keyless(
        new Refusal('missing_api_key', 'Send your API key as "Authorization: Bearer <key>".', {
          'WWW-Authenticate': REALM,
        }),
      ),
    );
    expect(request.key).toBeNull();
    expect(keys.resolve).not.toHaveBeenCalled();
    expect(await counted(metrics.authFailures, { reason: 'missing' })).toBe(1);
    expect(await countedInAll(metrics.authFailures)).toBe(1);
    expect(request).toMatchObject({ keyId: null, plan: 'anonymous', rateLimitOutcome: null });
  });

  it('an empty Authorization header counts as missing', async () => {
    const { authenticate, keys, metrics } = setUp();
    const { request } = await authenticated(authenticate, withAuthorization(''));
    expect(request.keyless).toMatchObject({ known: false, refusal: { code: 'missing_api_key' } });
    expect(keys.resolve).not.toHaveBeenCalled();
    expect(await counted(metrics.authFailures, { reason: 'missing' })).toBe(1);
  });

  it('two Authorization headers, whatever their case, are refused without asking the store', async () => {
    const { authenticate, keys, metrics } = setUp();
    const req = incoming('GET', '/v1/pets', [
      ['Authorization', `Bearer ${PRESENTED}`],
      ['authorization', 'Bearer asg_test_someoneElse0000000000000000'],
    ]);
    const { request } = await authenticated(authenticate, req);
    expect(request.keyless).toEqual(
      keyless(
        new Refusal('invalid_api_key', 'Send exactly one Authorization header.', {
          'WWW-Authenticate': `${REALM}, error="invalid_request", error_description="Send exactly one Authorization header."`,
        }),
      ),
    );
    expect(keys.resolve).not.toHaveBeenCalled();
    expect(await counted(metrics.authFailures, { reason: 'invalid' })).toBe(1);
  });

  it.each([['Basic dXNlcjpwYXNz'], [PRESENTED], ['Bearer'], ['Bearer two tokens'], ['Token abc']])(
    'a credential that is not one bearer token (%s) gets invalid_api_key with the bare challenge',
    async (header) => {
      const { authenticate, keys, metrics } = setUp();
      const { request } = await authenticated(authenticate, withAuthorization(header));
      expect(request.keyless).toEqual(
        keyless(
          new Refusal('invalid_api_key', 'The API key is not valid for this environment.', {
            'WWW-Authenticate': REALM,
          }),
        ),
      );
      expect(keys.resolve).not.toHaveBeenCalled();
      expect(await counted(metrics.authFailures, { reason: 'invalid' })).toBe(1);
    },
  );

  it('reads the scheme case-insensitively and trims the token before asking the store', async () => {
    const { authenticate, keys } = setUp();
    const { outcome, request } = await authenticated(authenticate, withAuthorization(`bearer   ${PRESENTED}  `));
    expect(keys.resolve).toHaveBeenCalledWith(PRESENTED);
    expect(outcome).toBe(CONTINUE);
    expect(request.key).toEqual(record);
  });

  it('an unknown key goes on keyless with invalid_token in its challenge', async () => {
    const { authenticate, keys, metrics } = setUp({ status: 'invalid' });
    const { outcome, request } = await authenticated(authenticate);
    expect(keys.resolve).toHaveBeenCalledWith(PRESENTED);
    expect(outcome).toBe(CONTINUE);
    expect(request.keyless).toEqual(
      keyless(
        new Refusal('invalid_api_key', 'The API key is not valid for this environment.', {
          'WWW-Authenticate': `${REALM}, error="invalid_token", error_description="The API key is not valid for this environment."`,
        }),
      ),
    );
    expect(await counted(metrics.authFailures, { reason: 'invalid' })).toBe(1);
    expect(request).toMatchObject({ key: null, keyId: null, plan: 'anonymous' });
  });

  it('a key the issued-key filter proved never issued is keyless and marked neverIssued, refused like any unknown key', async () => {
    const { request } = await authenticated(setUp({ status: 'invalid', neverIssued: true }).authenticate);
    expect(request.keyless).toMatchObject({ known: false, neverIssued: true, refusal: { code: 'invalid_api_key' } });
    const { request: unknown } = await authenticated(setUp({ status: 'invalid' }).authenticate);
    expect(unknown.keyless).toMatchObject({ known: false, neverIssued: false });
  });

  it('a revoked key is a known keyless caller refused with revoked_api_key; it never becomes the request key', async () => {
    const { authenticate, metrics } = setUp({ status: 'revoked', record });
    const { outcome, request } = await authenticated(authenticate);
    expect(outcome).toBe(CONTINUE);
    expect(request.keyless).toEqual(
      keyless(
        new Refusal('revoked_api_key', 'This API key has been revoked.', {
          'WWW-Authenticate': `${REALM}, error="invalid_token", error_description="This API key has been revoked."`,
        }),
        true,
      ),
    );
    expect(await counted(metrics.authFailures, { reason: 'revoked' })).toBe(1);
    expect(request).toMatchObject({ key: null, keyId: null, plan: 'anonymous' });
  });

  it('an expired key is a known keyless caller refused with expired_api_key', async () => {
    const { authenticate, metrics } = setUp({ status: 'expired', record });
    const { request } = await authenticated(authenticate);
    expect(request.keyless).toEqual(
      keyless(
        new Refusal('expired_api_key', 'This API key has expired.', {
          'WWW-Authenticate': `${REALM}, error="invalid_token", error_description="This API key has expired."`,
        }),
        true,
      ),
    );
    expect(await counted(metrics.authFailures, { reason: 'expired' })).toBe(1);
  });

  it('a valid key names the caller: its record, key id and plan written into the request', async () => {
    const { authenticate, metrics } = setUp();
    const { outcome, request } = await authenticated(authenticate);
    expect(outcome).toBe(CONTINUE);
    expect(request).toMatchObject({
      key: record,
      keyless: null,
      keyId: record.id,
      plan: 'pro',
      rateLimitOutcome: null,
    });
    expect(await countedInAll(metrics.authFailures)).toBe(0);
  });

  it('a store that throws answers 503 service_unavailable with Retry-After 1, counted and logged as a store error', async () => {
    const { authenticate, metrics, lines } = setUp(new Error('connection refused'));
    const { outcome, request } = await authenticated(authenticate);
    expect(outcome).toEqual(
      new Refusal('service_unavailable', 'The gateway cannot reach its store right now. Retry shortly.', {
        'Retry-After': '1',
      }),
    );
    expect(request.rateLimitOutcome).toBe('store_error');
    expect(request).toMatchObject({ key: null, keyless: null, keyId: null });
    expect(await counted(metrics.storeErrors)).toBe(1);
    expect(await countedInAll(metrics.authFailures)).toBe(0);
    const [line] = lines();
    expect(line).toMatchObject({
      level: 50,
      msg: 'store unavailable',
      requestId: 'req-0001',
      err: { message: 'connection refused' },
    });
    expect(JSON.stringify(lines())).not.toContain(PRESENTED);
  });
});

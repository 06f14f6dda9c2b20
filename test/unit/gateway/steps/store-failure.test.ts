import type { GatewayRequestSpan, StepSpan } from '../../../../src/shared/telemetry/telemetry';
import { Refusal } from '../../../../src/gateway/refusals';
import { counted, requestContext, stepEnvironment } from './step-kit';

const STORE_UNAVAILABLE = new Refusal(
  'service_unavailable',
  'The gateway cannot reach its store right now. Retry shortly.',
  { 'Retry-After': '1' },
);

/** A span that notes how each of its steps ended. */
function recordingSpan() {
  const ended: Array<{ name: string; attributes: unknown; error: unknown }> = [];
  const span = {
    recording: true,
    step: (name: string) =>
      ({
        end: (attributes?: unknown, error?: unknown) => ended.push({ name, attributes, error }),
      }) as unknown as StepSpan,
  } as unknown as GatewayRequestSpan;
  return { span, ended };
}

describe('store call', () => {
  it('passes the value through and leaves the request alone', async () => {
    const { storeCall, metrics, lines } = stepEnvironment();
    const request = requestContext();
    expect(
      await storeCall(
        request,
        'key lookup',
        async () => 42,
        () => ({}),
      ),
    ).toBe(42);
    expect(request.rateLimitOutcome).toBeNull();
    expect(await counted(metrics.storeErrors)).toBe(0);
    expect(lines()).toEqual([]);
  });

  it.each([
    ['rejects', () => Promise.reject(new Error('ECONNREFUSED'))],
    [
      'throws before it returns a promise',
      () => {
        throw new Error('ECONNREFUSED');
      },
    ],
  ])(
    'a call that %s is answered 503 with Retry-After 1, counted, logged and noted as store_error',
    async (_how, call) => {
      const { storeCall, metrics, lines } = stepEnvironment();
      const request = requestContext({ requestId: 'req-store' });
      expect(await storeCall(request, 'rate limit', call as () => Promise<number>, () => ({}))).toEqual(
        STORE_UNAVAILABLE,
      );
      expect(request.rateLimitOutcome).toBe('store_error');
      expect(await counted(metrics.storeErrors)).toBe(1);
      expect(lines()).toEqual([
        expect.objectContaining({
          level: 50,
          msg: 'store unavailable',
          requestId: 'req-store',
          err: expect.objectContaining({ message: 'ECONNREFUSED' }),
        }),
      ]);
    },
  );

  it('a traced request gets a child span per call, ended with what describe says or with store_error', async () => {
    const { storeCall } = stepEnvironment();
    const { span, ended } = recordingSpan();
    const request = requestContext({ span });
    await storeCall(
      request,
      'key lookup',
      async () => 'valid',
      (status) => ({ 'asg.key.status': status }),
    );
    await storeCall(
      request,
      'rate limit',
      () => Promise.reject(new Error('down')),
      () => ({ never: 'called' }),
    );
    expect(ended).toEqual([
      { name: 'key lookup', attributes: { 'asg.key.status': 'valid' }, error: undefined },
      { name: 'rate limit', attributes: undefined, error: 'store_error' },
    ]);
  });
});

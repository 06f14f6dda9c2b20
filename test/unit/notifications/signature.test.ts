import { Webhook } from 'standardwebhooks';
import { webhookHeaders, webhookSignature } from '../../../src/notifications/signature';
import { webhookSecretBytes } from '../../../src/shared/config';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('Standard Webhooks signing', () => {
  test('the reference library verifies what we sign, and returns the body', () => {
    const body = JSON.stringify({
      type: 'quota.threshold',
      timestamp: '2026-03-10T12:00:00.000Z',
      data: { keyId: 'key_1', threshold: 80 },
    });
    const headers = webhookHeaders(webhookSecretBytes(SECRET)!, 'msg_1', Date.now(), body);
    expect(new Webhook(SECRET).verify(body, headers)).toEqual(JSON.parse(body));
    expect(headers['content-type']).toBe('application/json');
  });

  test("the specification's example signature", () => {
    // From the Standard Webhooks specification: id msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp 1614265330.
    const signature = webhookSignature(
      webhookSecretBytes(SECRET)!,
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      1614265330,
      '{"test": 2432232314}',
    );
    expect(signature).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  test('a changed body, id or timestamp, or another secret, fails verification', () => {
    const body = '{"type":"key.banned"}';
    const now = Date.now();
    const headers = webhookHeaders(webhookSecretBytes(SECRET)!, 'msg_2', now, body);
    const verifier = new Webhook(SECRET);
    expect(() => verifier.verify('{"type":"key.expiring"}', headers)).toThrow('No matching signature found');
    expect(() => verifier.verify(body, { ...headers, 'webhook-id': 'msg_3' })).toThrow('No matching signature found');
    expect(() =>
      verifier.verify(body, { ...headers, 'webhook-timestamp': String(Math.floor(now / 1000) + 1) }),
    ).toThrow('No matching signature found');
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(body, headers)).toThrow(
      'No matching signature found',
    );
  });
});

import { SignJWT } from 'jose';
import { ManualClock } from '../../../../src/shared/clock';
import {
  UpstreamTokenSigner,
  UpstreamTokenVerifier,
  type UpstreamTokenSettings,
} from '../../../../src/shared/http/upstream-token';

const settings: UpstreamTokenSettings = {
  secret: 'current-secret-current-secret-current-secret',
  issuer: 'animal-store-gateway',
  audience: 'animal-store-inventory',
  tokenTtlSeconds: 60,
};
const claims = { keyId: 'key_abc', plan: 'pro' };

describe('upstream token', () => {
  it('round-trips the key id and plan', async () => {
    const clock = new ManualClock();
    const token = await new UpstreamTokenSigner(settings, clock).sign(claims);
    expect(await new UpstreamTokenVerifier(settings, clock).verify(token)).toEqual(claims);
  });

  it('reuses a token for half its lifetime, then signs a new one', async () => {
    const clock = new ManualClock();
    const signer = new UpstreamTokenSigner(settings, clock);
    const first = await signer.sign(claims);
    clock.advance(29_000);
    expect(await signer.sign(claims)).toBe(first);
    clock.advance(2_000);
    expect(await signer.sign(claims)).not.toBe(first);
  });

  it.each([
    ['missing', undefined],
    ['garbage', 'not-a-token'],
    ['oversized', 'a'.repeat(5000)],
  ])('refuses a %s token', async (_label, token) => {
    expect(await new UpstreamTokenVerifier(settings, new ManualClock()).verify(token)).toBeNull();
  });

  it('refuses a token signed with another secret', async () => {
    const clock = new ManualClock();
    const forged = await new UpstreamTokenSigner(
      { ...settings, secret: 'attacker-secret-attacker-secret-attacker' },
      clock,
    ).sign(claims);
    expect(await new UpstreamTokenVerifier(settings, clock).verify(forged)).toBeNull();
  });

  it('refuses an expired token (beyond the 5 s tolerance)', async () => {
    const clock = new ManualClock();
    const token = await new UpstreamTokenSigner(settings, clock).sign(claims);
    clock.advance(66_000);
    expect(await new UpstreamTokenVerifier(settings, clock).verify(token)).toBeNull();
  });

  it('refuses a token for another audience or from another issuer', async () => {
    const clock = new ManualClock();
    const verifier = new UpstreamTokenVerifier(settings, clock);
    const wrongAudience = await new UpstreamTokenSigner({ ...settings, audience: 'someone-else' }, clock).sign(claims);
    const wrongIssuer = await new UpstreamTokenSigner({ ...settings, issuer: 'someone-else' }, clock).sign(claims);
    expect(await verifier.verify(wrongAudience)).toBeNull();
    expect(await verifier.verify(wrongIssuer)).toBeNull();
  });

  it('refuses a token issued in the future', async () => {
    const clock = new ManualClock();
    const future = new ManualClock(clock.now() + 10 * 60_000);
    const token = await new UpstreamTokenSigner({ ...settings, tokenTtlSeconds: 3600 }, future).sign(claims);
    expect(await new UpstreamTokenVerifier(settings, clock).verify(token)).toBeNull();
  });

  it('refuses a token without a key id even when the secret is right', async () => {
    const clock = new ManualClock();
    const now = Math.floor(clock.now() / 1000);
    const token = await new SignJWT({ plan: 'pro' })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('key_abc')
      .setIssuer(settings.issuer)
      .setAudience(settings.audience)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(new TextEncoder().encode(settings.secret));
    expect(await new UpstreamTokenVerifier(settings, clock).verify(token)).toBeNull();
  });

  it('accepts tokens of the previous secret during a rotation, and only while it is listed', async () => {
    const clock = new ManualClock();
    const oldSecret = 'previous-secret-previous-secret-previous';
    const signedWithOld = await new UpstreamTokenSigner({ ...settings, secret: oldSecret }, clock).sign(claims);
    expect(
      await new UpstreamTokenVerifier({ ...settings, previousSecrets: [oldSecret] }, clock).verify(signedWithOld),
    ).toEqual(claims);
    expect(await new UpstreamTokenVerifier(settings, clock).verify(signedWithOld)).toBeNull();
  });
});

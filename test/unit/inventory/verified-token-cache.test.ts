import { ManualClock } from '../../../src/shared/clock';
import {
  UpstreamTokenSigner,
  UpstreamTokenVerifier,
  type UpstreamClaims,
} from '../../../src/shared/http/upstream-token';
import { VerifiedTokenCache } from '../../../src/inventory/verified-token-cache';

const settings = {
  secret: 'cache-test-secret-0123456789abcdefghij',
  issuer: 'gw',
  audience: 'inv',
  tokenTtlSeconds: 60,
};

describe('VerifiedTokenCache', () => {
  let clock: ManualClock;
  let calls: number;
  let cache: VerifiedTokenCache;
  let signer: UpstreamTokenSigner;

  beforeEach(() => {
    clock = new ManualClock(Date.UTC(2026, 0, 1));
    const real = new UpstreamTokenVerifier(settings, clock);
    calls = 0;
    // The real verifier, counted: a hit must not reach it.
    const counted = {
      verify: (token: string | undefined): Promise<UpstreamClaims | null> => {
        calls += 1;
        return real.verify(token);
      },
    };
    cache = new VerifiedTokenCache(counted, clock, 3);
    signer = new UpstreamTokenSigner(settings, clock);
  });

  it('verifies a token once and then answers from memory until it expires', async () => {
    const token = await signer.sign({ keyId: 'k1', plan: 'pro' });
    expect(await cache.verify(token)).toEqual({ keyId: 'k1', plan: 'pro' });
    expect(await cache.verify(token)).toEqual({ keyId: 'k1', plan: 'pro' });
    expect(calls).toBe(1);

    clock.advance(60_000);
    // At exp the entry is dropped and the real verifier decides (it allows 5 s of skew).
    expect(await cache.verify(token)).toEqual({ keyId: 'k1', plan: 'pro' });
    expect(calls).toBe(2);
    clock.advance(10_000);
    expect(await cache.verify(token)).toBeNull();
  });

  it('never caches a refusal, and a tampered token is not a hit', async () => {
    const token = await signer.sign({ keyId: 'k1', plan: 'pro' });
    await cache.verify(token);
    const tampered = token.slice(0, -2) + (token.endsWith('A') ? 'BB' : 'AA');
    expect(await cache.verify(tampered)).toBeNull();
    expect(await cache.verify(tampered)).toBeNull();
    expect(calls).toBe(3);
  });

  it('passes a missing token straight to the verifier', async () => {
    expect(await cache.verify(undefined)).toBeNull();
    expect(await cache.verify('')).toBeNull();
  });

  it('stays bounded: a full cache starts over', async () => {
    const tokens = await Promise.all(['a', 'b', 'c', 'd'].map((keyId) => signer.sign({ keyId, plan: 'free' })));
    for (const token of tokens) await cache.verify(token);
    expect(calls).toBe(4);
    await cache.verify(tokens[0]!);
    expect(calls).toBe(5);
    await cache.verify(tokens[3]!);
    expect(calls).toBe(5);
  });
});

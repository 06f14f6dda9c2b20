import type { Clock } from '../shared/clock';
import type { UpstreamClaims, UpstreamTokenVerifier } from '../shared/http/upstream-token';

type Verifier = Pick<UpstreamTokenVerifier, 'verify'>;

/** `exp` of a JWT whose signature was already checked, in ms; null if it has none. */
function expiryMs(token: string): number | null {
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      exp?: unknown;
    };
    return typeof payload.exp === 'number' ? payload.exp * 1000 : null;
  } catch {
    return null;
  }
}

/**
 * Remembers tokens that verified, until their `exp`. The gateway reuses one token per key for half
 * its lifetime, so most requests carry a token already seen, and skipping the HMAC and claim
 * checks for it is about a third of the cost of a small request. Only successes are kept, keyed by
 * the whole token string, and every hit is checked against the clock again.
 */
export class VerifiedTokenCache implements Verifier {
  private readonly verified = new Map<string, { claims: UpstreamClaims; expiresAtMs: number }>();

  constructor(
    private readonly verifier: Verifier,
    private readonly clock: Clock,
    private readonly maxEntries = 10_000,
  ) {}

  async verify(token: string | undefined): Promise<UpstreamClaims | null> {
    if (!token) return this.verifier.verify(token);
    const hit = this.verified.get(token);
    if (hit) {
      if (hit.expiresAtMs > this.clock.now()) return hit.claims;
      this.verified.delete(token);
    }
    const claims = await this.verifier.verify(token);
    const expiresAtMs = claims ? expiryMs(token) : null;
    if (claims && expiresAtMs !== null) {
      // Bounded: a full cache starts over rather than tracking recency on the hot path.
      if (this.verified.size >= this.maxEntries) this.verified.clear();
      this.verified.set(token, { claims, expiresAtMs });
    }
    return claims;
  }
}

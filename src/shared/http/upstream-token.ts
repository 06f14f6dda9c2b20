import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { Clock } from '../clock';

/** Header that carries the gateway's signed token to the inventory. Clients can never set it. */
export const UPSTREAM_TOKEN_HEADER = 'x-gateway-token';

export interface UpstreamTokenSettings {
  secret: string;
  /** Accepted by the verifier during a rotation; never used to sign. */
  previousSecrets?: string[];
  issuer: string;
  audience: string;
  tokenTtlSeconds: number;
}

/** Names a secret in the token header without revealing it, so the verifier picks the right one. */
function keyIdOf(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url').slice(0, 12);
}

export interface UpstreamClaims {
  keyId: string;
  plan: string;
}

/**
 * Signs the short-lived HS256 token the inventory requires. A token is reused for the same key and
 * plan until half its lifetime has passed, so the hot path signs about once per key per half-TTL
 * instead of once per request.
 */
export class UpstreamTokenSigner {
  private readonly secret: Uint8Array;
  private readonly keyId: string;
  /** By key id: the plan it was signed for, the token, and when to sign anew. */
  private readonly cache = new Map<string, { plan: string; token: string; refreshAt: number }>();

  constructor(
    private readonly settings: UpstreamTokenSettings,
    private readonly clock: Clock,
  ) {
    this.secret = new TextEncoder().encode(settings.secret);
    this.keyId = keyIdOf(settings.secret);
  }

  /**
   * The token signed for this key and plan, while it is not due for renewal; undefined otherwise
   * (then `sign`). Synchronous, so that the hot path waits on no promise for a cached token.
   */
  cachedToken(keyId: string, plan: string): string | undefined {
    const cached = this.cache.get(keyId);
    return cached !== undefined && cached.plan === plan && cached.refreshAt > this.clock.now()
      ? cached.token
      : undefined;
  }

  async sign(claims: UpstreamClaims): Promise<string> {
    const cached = this.cachedToken(claims.keyId, claims.plan);
    if (cached !== undefined) return cached;
    const now = this.clock.now();
    const issuedAt = Math.floor(now / 1000);
    const token = await new SignJWT({ plan: claims.plan })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: this.keyId })
      .setSubject(claims.keyId)
      .setIssuer(this.settings.issuer)
      .setAudience(this.settings.audience)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + this.settings.tokenTtlSeconds)
      .sign(this.secret);
    // Bounded: one entry per active key (a key whose plan changed has its entry replaced); stale ones are replaced on their next use.
    if (this.cache.size > 100_000) this.cache.clear();
    this.cache.set(claims.keyId, {
      plan: claims.plan,
      token,
      refreshAt: now + (this.settings.tokenTtlSeconds * 1000) / 2,
    });
    return token;
  }
}

export class UpstreamTokenVerifier {
  /** Current and previous secrets by key id. */
  private readonly secrets = new Map<string, Uint8Array>();

  constructor(
    private readonly settings: UpstreamTokenSettings,
    private readonly clock: Clock,
  ) {
    for (const secret of [settings.secret, ...(settings.previousSecrets ?? [])]) {
      this.secrets.set(keyIdOf(secret), new TextEncoder().encode(secret));
    }
  }

  private readonly secretFor = (header: { kid?: string }): Uint8Array => {
    const secret = header.kid === undefined ? undefined : this.secrets.get(header.kid);
    if (!secret) throw new joseErrors.JWSSignatureVerificationFailed('unknown signing key');
    return secret;
  };

  /** The claims of a valid token, or null for a missing, forged, expired or misaddressed one. */
  async verify(token: string | undefined): Promise<UpstreamClaims | null> {
    if (!token || token.length > 4096) return null;
    try {
      const { payload } = await jwtVerify(token, this.secretFor, {
        algorithms: ['HS256'],
        issuer: this.settings.issuer,
        audience: this.settings.audience,
        currentDate: new Date(this.clock.now()),
        clockTolerance: 5,
        // Also refuses tokens issued in the future, which jose checks only with a maximum age.
        maxTokenAge: this.settings.tokenTtlSeconds,
        requiredClaims: ['sub', 'exp', 'iat'],
      });
      if (typeof payload.sub !== 'string' || typeof payload.plan !== 'string') return null;
      return { keyId: payload.sub, plan: payload.plan };
    } catch (err) {
      if (err instanceof joseErrors.JOSEError) return null;
      throw err;
    }
  }
}

/**
 * The secret from config, or in development one generated once and kept under dataDir so the
 * embedded and a standalone inventory agree with the gateway across restarts.
 */
export function resolveSigningSecret(configured: string | null, dataDir: string): string {
  if (configured) return configured;
  const file = path.join(dataDir, 'signing-secret');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    fs.mkdirSync(dataDir, { recursive: true });
    const secret = randomBytes(32).toString('base64url');
    fs.writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
    return secret;
  }
}

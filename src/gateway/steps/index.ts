import type { Config } from '../../shared/config';
import type { Clock } from '../../shared/clock';
import type { Logger } from '../../shared/logger';
import type { UpstreamTokenSigner } from '../../shared/http/upstream-token';
import { PlanBook } from '../../limits/plan-limits';
import type { AddressLimiter, ConsumerShare, KeyLimiter } from '../../limits/types';
import type { ApiKeyRecord } from '../../keys/types';
import { createCorsPolicy, type CorsPolicy } from '../cors';
import { buildDeprecations } from '../operations/deprecation';
import { OperationCosts } from '../operations/operation-costs';
import type { Forwarder } from '../upstream/forward-contract';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import { jitteredRetryAfterSeconds, type RandomSource } from '../rate-limit-headers';
import { createStoreCall } from './store-failure';
import { checkFraming } from './check-framing';
import { createPreflightStep } from './cors-preflight';
import { createOperationStep } from './match-operation';
import { createAuthenticateStep, type KeyLookup } from './authenticate';
import { createAnonymousLimitStep } from './limit-anonymous';
import { createUsageStep } from './answer-usage';
import { createRevokeOwnKeyStep, type OwnKeyRevocation } from './revoke-own-key';
import { createAccessStep, type ConsumerAccessPolicy } from './check-access';
import { createKeyLimitStep, type KeyDecisionListener } from './limit-key';
import { checkRoute } from './check-route';
import { createSunsetStep } from './sunset';
import { createForwardStep } from './forward';
import { createRecordStep } from './record-request';

export type { KeyLookup, KeyDecisionListener, ConsumerAccessPolicy, OwnKeyRevocation };

/** What the steps that decide a request need: everything but the way to the inventory. */
export interface DecisionDependencies {
  config: Config;
  keyResolver: KeyLookup;
  keyLimiter: KeyLimiter;
  addressLimiter: AddressLimiter;
  signer: UpstreamTokenSigner;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  /** Uniform [0, 1) numbers for Retry-After jitter; Math.random unless a test fixes it. */
  random?: RandomSource;
  /** Remembers which keys call deprecated operations (GET /admin/deprecations); off the request path. */
  deprecationUsage?: { record(operationId: string, keyId: string): void };
  /** Counts each key's admitted, rate-limited and banned requests and its last use; off the request path. */
  keyActivity?: { record(keyId: string, outcome: 'admitted' | 'rateLimited' | 'banned'): void };
  /** Told every limiter decision of a key and its cost (usage units, webhooks); must not wait on anything. */
  keyDecisions?: KeyDecisionListener;
  /** The access policy of a key's consumer, from memory (steps/check-access.ts); absent: keys alone decide. */
  consumerAccessPolicy?: ConsumerAccessPolicy;
  /** Each key's consumer, held in process (src/consumers): its shared windows and its name. */
  consumers?: ConsumerLookup;
  /** POST /v1/keys/revoke: the caller's key revoked, audited and announced (src/product/key-revocations.ts). */
  keyRevocation?: OwnKeyRevocation;
}

/** The public listener's dependencies: the deciding steps', and the forwarder to the inventory. */
export interface GatewayDependencies extends DecisionDependencies {
  forwarder: Forwarder;
}

/** What the key steps ask about a key's consumer, without a store command. */
export interface ConsumerLookup {
  /** The consumer with limits of its own, whose windows the key's requests also take units of. */
  shareOf(record: ApiKeyRecord): ConsumerShare | undefined;
  /** The key's consumer, with or without limits. */
  consumerOf(record: ApiKeyRecord): { id: string; name: string; share?: ConsumerShare } | undefined;
}

/** Every step of the request path, each built once from the part of the dependencies it needs. */
export function createSteps(deps: GatewayDependencies) {
  const { config, metrics, logger } = deps;
  return {
    ...createDecidingSteps(deps),
    forward: createForwardStep({
      forwarder: deps.forwarder,
      signer: deps.signer,
      metrics,
      logger,
      maxBodyBytes: config.server.maxBodyBytes,
      publicBaseUrl: config.server.publicBaseUrl,
    }),
    recordRequest: createRecordStep({ metrics, logger, keyActivity: deps.keyActivity }),
  };
}

/**
 * The steps that decide a request, forwarding and recording aside: the public listener's sequence
 * and the decision listener's (src/gateway/authz) are both built from these, so a request is
 * decided and counted the same way on either. `plans` answers the key steps (default: the
 * config's plans as they are).
 */
export function createDecidingSteps(deps: DecisionDependencies, plans: PlanBook = new PlanBook(deps.config.plans)) {
  const { config, metrics, logger, clock } = deps;
  // A key's own limits, else its plan's; null for a plan not configured here, which the key steps refuse with 503.
  const keyLimits = (record: ApiKeyRecord) => plans.limitsOf(record);
  const random = deps.random ?? Math.random;
  const jitterSeconds = config.rateLimit.retryAfterJitterSeconds;
  const retryAfter = (waitMs: number) => jitteredRetryAfterSeconds(waitMs, jitterSeconds, random);
  const storeCall = createStoreCall({ metrics, logger });
  const cors: CorsPolicy | null = config.cors.allowedOrigins.length > 0 ? createCorsPolicy(config.cors) : null;
  return {
    cors,
    checkFraming,
    answerPreflight: createPreflightStep(cors),
    matchOperation: createOperationStep(buildDeprecations(config.deprecations)),
    authenticate: createAuthenticateStep({ keyResolver: deps.keyResolver, metrics, storeCall }),
    limitAnonymous: createAnonymousLimitStep({
      addressLimiter: deps.addressLimiter,
      metrics,
      clock,
      storeCall,
      retryAfter,
    }),
    checkAccess: createAccessStep({ metrics, logger, consumerPolicy: deps.consumerAccessPolicy }),
    answerUsage: createUsageStep({
      keyLimiter: deps.keyLimiter,
      keyLimits,
      clock,
      storeCall,
      consumerOf: deps.consumers?.consumerOf,
      hiddenWindowsOf: (record, consumer) => plans.hiddenWindowsOf(record, consumer),
    }),
    revokeOwnKey: createRevokeOwnKeyStep({ revocation: deps.keyRevocation, storeCall }),
    limitKey: createKeyLimitStep({
      keyLimiter: deps.keyLimiter,
      keyLimits,
      plans,
      metrics,
      logger,
      storeCall,
      retryAfter,
      costs: new OperationCosts(config.costs),
      onDecision: deps.keyDecisions,
      consumerOf: deps.consumers?.shareOf,
      leaseTtlMs: config.upstream.timeoutMs + 1000,
    }),
    checkRoute,
    applySunset: createSunsetStep({ metrics, clock, deprecationUsage: deps.deprecationUsage }),
  };
}

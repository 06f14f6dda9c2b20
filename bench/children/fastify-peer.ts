import { createHash, randomBytes } from 'node:crypto';
import Fastify, { type FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import replyFrom from '@fastify/reply-from';
import Redis from 'ioredis';
import pino from 'pino';
import { announceReady, childOptions, countRequestsReceived } from '../processes';

/**
 * The peer: what a Node user would assemble in an afternoon instead of adopting the gateway.
 * fastify 5, a bearer key looked up by its SHA-256 in a Map, @fastify/rate-limit on the bench's
 * Redis (its own Lua script: one EVALSHA per request), @fastify/reply-from (undici) to the same
 * upstream, and fastify's own log lines (pino) written to a file. It does less than the gateway:
 * one window, no ban, no daily window, no metrics, no signed token upstream.
 */
interface PeerOptions {
  target: string;
  redisUrl: string;
  namespace: string;
  logFile: string;
  /** Keys the peer issues besides `admitted`, for the round-robin row (0: none). */
  extraKeys?: number;
}

interface PeerKey {
  id: string;
  plan: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: PeerKey | null;
  }
}

// Every command this process sends to Redis is a request and its reply: a round trip.
let redisCommandsSent = 0;
const requestsReceived = countRequestsReceived();
const sendCommand = Redis.prototype.sendCommand;
Redis.prototype.sendCommand = function countedSendCommand(this: Redis, ...args: Parameters<Redis['sendCommand']>) {
  redisCommandsSent++;
  return sendCommand.apply(this, args);
};

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const BEARER = /^Bearer +(\S+) *$/i;

async function main(): Promise<void> {
  const options = childOptions<PeerOptions>();
  const keys = new Map<string, PeerKey>();
  const issue = (id: string) => {
    const key = `peer_${randomBytes(24).toString('base64url')}`;
    keys.set(sha256(key), { id, plan: 'enterprise' });
    return key;
  };
  const admitted = issue('admitted');
  const extra = Array.from({ length: options.extraKeys ?? 0 }, (_, i) => issue(`extra-${i}`));

  const redis = new Redis(options.redisUrl, { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  const app = Fastify({
    logger: { level: 'info', stream: pino.destination({ dest: options.logFile, sync: false }) },
    keepAliveTimeout: 65_000,
  });
  app.decorateRequest('caller', null);
  // Who is calling, before the limit: the key's SHA-256 in a Map, as the gateway's cache hit does.
  app.addHook('onRequest', async (request, reply) => {
    const presented = BEARER.exec(request.headers.authorization ?? '')?.[1];
    const caller = presented ? keys.get(sha256(presented)) : undefined;
    if (!caller)
      return reply.code(401).send({ code: 'invalid_api_key', message: 'Send a valid API key.', status: 401 });
    request.caller = caller;
  });
  await app.register(rateLimit, {
    hook: 'preHandler',
    max: 1_000_000_000,
    timeWindow: 60_000,
    redis,
    nameSpace: `${options.namespace}:`,
    keyGenerator: (request: FastifyRequest) => request.caller!.id,
  });
  await app.register(replyFrom, { base: options.target, undici: { connections: 256, pipelining: 1 } });
  app.all('/*', (request, reply) => reply.from(request.url));
  const address = await app.listen({ port: 0, host: '127.0.0.1' });

  const details: Record<string, string> = { admitted };
  if (extra.length > 0) details.keys = extra.join(',');
  announceReady(
    address,
    details,
    () => redisCommandsSent,
    async () => {
      await app.close();
      redis.disconnect();
    },
    requestsReceived,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench fastify peer: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});

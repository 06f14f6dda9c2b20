import { Agent, buildConnector, request } from 'undici';
import { reachesAdminListener, type AdminListenerAddress } from '../shared/http/admin-listener-address';

/** What one attempt came to: delivered (2xx), or why not, for the log. */
export type AttemptOutcome = { delivered: true; status: number } | { delivered: false; reason: string };

/** Bytes of a receiver's answer read before the connection is given back; the rest is discarded. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** A connection that reached this gateway's own admin listener: closed before a byte of the request is sent. */
export class AdminListenerReached extends Error {
  constructor(address: string, port: number) {
    super(`refused: ${address}:${port} is this gateway's admin listener`);
    this.name = 'AdminListenerReached';
  }
}

/**
 * undici's connector, with one check between connecting and sending: the address the connection
 * reached (what the name resolved to at this moment, as the kernel reports the peer) must not be
 * the admin listener. Checked on the socket rather than on a lookup beforehand, so that a name
 * whose DNS answer changes between a check and the connection (DNS rebinding) gains nothing.
 */
function connectorAvoiding(adminListener: () => AdminListenerAddress | null): buildConnector.connector {
  const connect = buildConnector({ timeout: 10_000 });
  return (options, callback) => {
    // An address in the URL itself is refused before connecting (`[::127.0.0.1]` may not connect at all).
    const admin = adminListener();
    const port = Number(options.port) || (options.protocol === 'https:' ? 443 : 80);
    if (admin !== null && reachesAdminListener(options.hostname, port, admin)) {
      callback(new AdminListenerReached(options.hostname, port), null);
      return;
    }
    connect(options, (err, socket) => {
      if (err !== null) return callback(err, null);
      const address = socket.remoteAddress ?? '';
      const peerPort = socket.remotePort ?? 0;
      const adminNow = adminListener();
      if (adminNow === null || !reachesAdminListener(address, peerPort, adminNow)) return callback(null, socket);
      socket.destroy();
      callback(new AdminListenerReached(address, peerPort), null);
    });
  };
}

/**
 * One POST per attempt, over undici with its own connection pool (never the forwarder's), bounded
 * as a whole by `timeoutMs`: connecting, the answer's headers and its body. Redirects are not
 * followed (a 3xx is a failed attempt, as the Standard Webhooks guidance has it): a receiver cannot
 * send the signed body anywhere else. A connection that reaches this gateway's own admin listener
 * is closed unused, and the attempt fails (connectorAvoiding).
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(
    private readonly timeoutMs: () => number,
    /** Where this gateway's admin listener answers, asked at each new connection; null: nowhere to avoid. */
    adminListener: () => AdminListenerAddress | null = () => null,
  ) {
    this.agent = new Agent({ connections: 8, keepAliveTimeout: 4_000, connect: connectorAvoiding(adminListener) });
  }

  /** Never throws: a failure is an outcome. `stop` aborts the attempt (shutting down). */
  async post(url: string, headers: Record<string, string>, body: string, stop: AbortSignal): Promise<AttemptOutcome> {
    const signal = AbortSignal.any([stop, AbortSignal.timeout(this.timeoutMs())]);
    try {
      const answer = await request(url, { method: 'POST', headers, body, signal, dispatcher: this.agent });
      await answer.body.dump({ limit: MAX_ANSWER_BYTES, signal }).catch(() => undefined);
      const status = answer.statusCode;
      if (status >= 200 && status < 300) return { delivered: true, status };
      return {
        delivered: false,
        reason: status >= 300 && status < 400 ? `redirect ${status} (not followed)` : `status ${status}`,
      };
    } catch (err) {
      if (signal.aborted && !stop.aborted)
        return { delivered: false, reason: `no answer within ${this.timeoutMs()} ms` };
      if (err instanceof AdminListenerReached) return { delivered: false, reason: err.message };
      const cause = (err as { cause?: { code?: string } }).cause;
      return { delivered: false, reason: (err as { code?: string }).code ?? cause?.code ?? (err as Error).name };
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }
}

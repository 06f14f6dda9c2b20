import { Agent, request } from 'undici';

/** What one attempt came to: delivered (2xx), or why not, for the log. */
export type AttemptOutcome = { delivered: true; status: number } | { delivered: false; reason: string };

/** Bytes of a receiver's answer read before the connection is given back; the rest is discarded. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * One POST per attempt, over undici with its own connection pool (never the forwarder's), bounded
 * as a whole by `timeoutMs`: connecting, the answer's headers and its body. Redirects are not
 * followed (a 3xx is a failed attempt, as the Standard Webhooks guidance has it): a receiver cannot
 * send the signed body anywhere else.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly timeoutMs: () => number) {
    this.agent = new Agent({ connections: 8, keepAliveTimeout: 4_000, connect: { timeout: 10_000 } });
  }

  /** Never throws: a failure is an outcome. `stop` aborts the attempt (shutting down). */
  async post(url: string, headers: Record<string, string>, body: string, stop: AbortSignal): Promise<AttemptOutcome> {
    const signal = AbortSignal.any([stop, AbortSignal.timeout(this.timeoutMs())]);
    try {
      const answer = await request(url, { method: 'POST', headers, body, signal, dispatcher: this.agent });
      await answer.body.dump({ limit: MAX_ANSWER_BYTES, signal }).catch(() => undefined);
      const status = answer.statusCode;
      if (status >= 200 && status < 300) return { delivered: true, status };
      return { delivered: false, reason: status >= 300 && status < 400 ? `redirect ${status} (not followed)` : `status ${status}` };
    } catch (err) {
      if (signal.aborted && !stop.aborted) return { delivered: false, reason: `no answer within ${this.timeoutMs()} ms` };
      const cause = (err as { cause?: { code?: string } }).cause;
      return { delivered: false, reason: (err as { code?: string }).code ?? cause?.code ?? (err as Error).name };
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }
}

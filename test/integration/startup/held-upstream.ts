import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * An upstream that holds requests until the test releases them, so that "in flight" is a state a
 * test controls rather than a race against a timer; and a GET that reports a cut connection as an
 * outcome. Shared by the shutdown and the workers suites.
 */

export interface FakeUpstream {
  url: string;
  /** Paths (with query) of the /v1 requests received so far, in arrival order. */
  receivedPaths(): string[];
  /** Resolves once `count` /v1 requests are held; rejects after `timeoutMs`. */
  waitForRequests(count: number, timeoutMs?: number): Promise<void>;
  /** Answers every held request with 200 and a body naming the request's own path. */
  release(): void;
  close(): Promise<void>;
}

/** What the fake upstream answers to `path`: each in-flight request gets its own body back. */
export function heldAnswer(
  pathAndQuery: string,
): Array<{ id: number; name: string; status: string; categoryId: number }> {
  return [{ id: 1, name: `answer to ${pathAndQuery}`, status: 'available', categoryId: 1 }];
}

/**
 * An inventory stand-in: /healthz answers at once, every /v1 request is held until release(). It
 * does not verify the gateway's signed token (it only checks one was sent).
 */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const held: Array<{ path: string; res: http.ServerResponse }> = [];
  const paths: string[] = [];
  const waiters = new Set<() => void>();
  let released = false;
  const answer = (path: string, res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(heldAnswer(path)));
  };
  const server = http.createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
      return;
    }
    const path = req.url ?? '';
    if (!req.headers['x-gateway-token']) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"code":"missing_token","message":"no gateway token","status":401}');
      return;
    }
    paths.push(path);
    if (released) answer(path, res);
    else held.push({ path, res });
    for (const waiter of waiters) waiter();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const upstream: FakeUpstream = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    receivedPaths: () => [...paths],
    waitForRequests(count, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (paths.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the upstream received ${paths.length} of ${count} requests within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    release() {
      released = true;
      for (const { path, res } of held.splice(0)) answer(path, res);
    },
    async close() {
      for (const { res } of held.splice(0)) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return upstream;
}

export type Outcome = { status: number; body: unknown } | { error: string };

/**
 * One GET; `agent` false sends `Connection: close`, a keep-alive agent keeps the connection open
 * after the answer, as browsers, load balancers and most HTTP clients do. A cut connection is an
 * outcome, not a failure.
 */
export function getThrough(
  agent: http.Agent | false,
  baseUrl: string,
  pathAndQuery: string,
  key: string,
): Promise<Outcome> {
  const url = new URL(pathAndQuery, baseUrl);
  return new Promise((resolve) => {
    const req = http.get(url, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text) as unknown;
        } catch {
          // not JSON: keep the text
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
  });
}

import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';

/** One answer, whichever protocol carried it: header names lower-case, as both clients give them. */
export interface TlsAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  body: unknown;
  /** What ALPN chose: 'h2' or 'http/1.1'. */
  protocol: string;
}

export interface TlsRequest {
  method?: string;
  path: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
}

export type Protocol = 'h2' | 'http/1.1';

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A client for the gateway's HTTPS listener that speaks one protocol: HTTP/2 over one session, or
 * HTTP/1.1 over a keep-alive agent offering only http/1.1 by ALPN. Both trust the test CA only.
 */
export class TlsClient {
  private session: http2.ClientHttp2Session | null = null;
  private readonly agent: https.Agent;
  private readonly ca: Buffer;

  constructor(
    private readonly baseUrl: string,
    caFile: string,
    readonly protocol: Protocol,
  ) {
    this.ca = fs.readFileSync(caFile);
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca: this.ca, ALPNProtocols: ['http/1.1'] });
  }

  /** The HTTP/2 session (opened on first use): tests watch it to show it stays open. */
  h2Session(): http2.ClientHttp2Session {
    if (!this.session || this.session.closed || this.session.destroyed) {
      this.session = http2.connect(this.baseUrl, { ca: this.ca });
      this.session.on('error', () => undefined);
    }
    return this.session;
  }

  request(req: TlsRequest): Promise<TlsAnswer> {
    return this.protocol === 'h2' ? this.overH2(req) : this.overHttp1(req);
  }

  private overH2(req: TlsRequest): Promise<TlsAnswer> {
    return new Promise((resolve, reject) => {
      const stream = this.h2Session().request(
        { ':method': req.method ?? 'GET', ':path': req.path, ...req.headers },
        { endStream: req.body === undefined },
      );
      const chunks: Buffer[] = [];
      let headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader = {};
      stream.on('response', (h) => (headers = h));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', reject);
      stream.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const { ':status': status, ...rest } = headers;
        resolve({ status: status ?? 0, headers: rest, text, body: parsed(text), protocol: 'h2' });
      });
      if (req.body !== undefined) stream.end(req.body);
    });
  }

  private overHttp1(req: TlsRequest): Promise<TlsAnswer> {
    return new Promise((resolve, reject) => {
      const outgoing = https.request(
        new URL(req.path, this.baseUrl),
        { method: req.method ?? 'GET', headers: req.headers, agent: this.agent },
        (res) => {
          const chunks: Buffer[] = [];
          // Read now: at 'end' a keep-alive socket is back in the agent's pool and res.socket is null.
          const alpn = (res.socket as import('node:tls').TLSSocket).alpnProtocol;
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text,
              body: parsed(text),
              protocol: alpn || 'none',
            });
          });
        },
      );
      outgoing.on('error', reject);
      outgoing.end(req.body);
    });
  }

  close(): void {
    this.session?.close();
    this.agent.destroy();
  }
}

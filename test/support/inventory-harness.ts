import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import request from 'supertest';
import { loadConfig, type Config } from '../../src/shared/config';
import { systemClock, type Clock } from '../../src/shared/clock';
import { createLogger, type Logger } from '../../src/shared/logger';
import {
  UPSTREAM_TOKEN_HEADER,
  UpstreamTokenSigner,
  type UpstreamTokenSettings,
} from '../../src/shared/http/upstream-token';
import { inventoryDatabasePath, startInventory, type RunningInventory } from '../../src/inventory/server';
import type { NewPet, Pet } from '../../src/inventory/pet';
import { freePort } from './redis-server';
import { START_HANG_GUARD_MS } from '../integration/startup/startup-kit';
import { eventually } from './eventually';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
export const TEST_SIGNING_SECRET = 'inventory-test-secret-0123456789abcdef';

export function makeTempDir(label: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `asg-${label}-`));
}

/** A config for tests: development defaults, a temp data dir, a known secret, silent logs. */
export function testConfig(dataDir: string, overrides: Record<string, unknown> = {}): Config {
  return loadConfig({
    env: {},
    overrides: { dataDir, logLevel: 'silent', signing: { secret: TEST_SIGNING_SECRET }, ...overrides } as never,
  });
}

/** Signs gateway tokens; with other settings it makes forged, misaddressed or expired ones. */
export function tokenSigner(
  config: Config,
  changes: Partial<UpstreamTokenSettings> = {},
  clock: Clock = systemClock,
): UpstreamTokenSigner {
  return new UpstreamTokenSigner(
    { ...config.signing, secret: config.signing.secret ?? TEST_SIGNING_SECRET, ...changes },
    clock,
  );
}

/** Rows in the pets table, read through a separate read-only connection to the real file. */
export function countPetRows(databaseFile: string): number {
  const db = new Database(databaseFile, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

export interface TestInventory {
  config: Config;
  dataDir: string;
  databaseFile: string;
  url: string;
  running: RunningInventory;
  /** A valid gateway token. */
  token(): Promise<string>;
  /** GET with a valid token (and any extra headers). */
  get(pathAndQuery: string, headers?: Record<string, string>): Promise<request.Response>;
  /** POST of a JSON body with a valid token (and any extra headers). */
  post(pathAndQuery: string, body: unknown, headers?: Record<string, string>): Promise<request.Response>;
  createPet(pet: Partial<NewPet> & { name: string; categoryId: number }): Promise<Pet>;
  countPets(): number;
  /** Stops the inventory; removes the data dir when the harness made it. */
  close(): Promise<void>;
}

/** The inventory in this process on a free loopback port, on a real SQLite file in a temp dir. */
export async function startTestInventory(
  options: {
    dataDir?: string;
    clock?: Clock;
    overrides?: Record<string, unknown>;
    /** Where the inventory logs; silent unless given. */
    logger?: Logger;
  } = {},
): Promise<TestInventory> {
  const ownsDataDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? makeTempDir('inventory');
  const config = testConfig(dataDir, options.overrides);
  const running = await startInventory(config, {
    port: 0,
    host: '127.0.0.1',
    logger: options.logger ?? createLogger('silent'),
    clock: options.clock,
  });
  const signer = tokenSigner(config, {}, options.clock);
  const token = () => signer.sign({ keyId: 'test-key', plan: 'free' });
  const inventory: TestInventory = {
    config,
    dataDir,
    databaseFile: inventoryDatabasePath(config),
    url: running.url,
    running,
    token,
    async get(pathAndQuery, headers = {}) {
      return request(running.url)
        .get(pathAndQuery)
        .set(headers)
        .set(UPSTREAM_TOKEN_HEADER, await token());
    },
    async post(pathAndQuery, body, headers = {}) {
      return request(running.url)
        .post(pathAndQuery)
        .set(headers)
        .set(UPSTREAM_TOKEN_HEADER, await token())
        .send(body as object);
    },
    async createPet(pet) {
      const res = await inventory.post('/v1/pets', pet);
      if (res.status !== 201) throw new Error(`createPet: expected 201, got ${res.status} ${res.text}`);
      return res.body as Pet;
    },
    countPets: () => countPetRows(inventoryDatabasePath(config)),
    async close() {
      await running.close();
      if (ownsDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return inventory;
}

export interface InventoryProcess {
  child: ChildProcess;
  url: string;
  port: number;
  /** Everything the process wrote to stderr so far (for failure messages). */
  stderr(): string;
  /** Resolves with the exit code and signal once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Runs `src/inventory/main.ts` as a real child process (TypeScript transpiled on the fly by test/support/ts-register.js)
 * and resolves once /healthz answers. The environment is built from scratch so nothing of the
 * caller's leaks into the config.
 */
export async function spawnInventoryProcess(options: {
  dataDir: string;
  port?: number;
  env?: Record<string, string>;
  waitUntilReady?: boolean;
}): Promise<InventoryProcess> {
  const port = options.port ?? (await freePort());
  const child = spawn(process.execPath, ['-r', './test/support/ts-register.js', 'src/inventory/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      DATA_DIR: options.dataDir,
      INVENTORY_PORT: String(port),
      SIGNING_SECRET: TEST_SIGNING_SECRET,
      LOG_LEVEL: 'warn',
      ...options.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const url = `http://127.0.0.1:${port}`;
  const processHandle: InventoryProcess = { child, url, port, stderr: () => stderr, exited };
  if (options.waitUntilReady === false) return processHandle;

  // The start guard of docs/testing.md: a hang guard, not a claim about speed (a start took over 20 s at load 20-27).
  let ended = false;
  void exited.then(() => {
    ended = true;
  });
  try {
    await eventually(
      async () => {
        if (ended) throw new Error(`inventory process exited before it was ready:\n${stderr}`);
        return fetch(`${url}/healthz`).then(
          (res) => res.status === 200,
          () => false, // not listening yet
        );
      },
      {
        timeoutMs: START_HANG_GUARD_MS,
        pollMs: 50,
        what: () => `the inventory process answering /healthz:\n${stderr}`,
      },
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return processHandle;
}

/** Sends `signal` and waits for the process to end. */
export async function stopInventoryProcess(
  proc: InventoryProcess,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill(signal);
  return proc.exited;
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The JSON body, or undefined when the body is not JSON. */
  body: unknown;
}

/**
 * One HTTP request with exactly the headers given (nothing added but Host, and Content-Length
 * when a body is given and none is set), for cases a client library would "fix": no content
 * type, a lying content type, raw bytes.
 */
export function rawRequest(
  baseUrl: string,
  options: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<RawResponse> {
  const url = new URL(baseUrl);
  const headers: Record<string, string> = { ...options.headers };
  if (
    options.body !== undefined &&
    !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length' || h.toLowerCase() === 'transfer-encoding')
  ) {
    headers['Content-Length'] = String(Buffer.byteLength(options.body));
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, method: options.method, path: options.path, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = text === '' ? undefined : (JSON.parse(text) as unknown);
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

import fs from 'node:fs';
import http from 'node:http';
import {
  isolatedEnv,
  LONG_ADMIN_TOKEN,
  LONG_SIGNING_SECRET,
  startMain,
  tempFile,
  type MainProcess,
} from './startup-kit';

/**
 * Issue 42: a 12 MB config reload froze the public listener 11 s (YAML parsing on the event loop,
 * about a second per megabyte here). Files over 1 MiB are refused before they are read; what is
 * read is parsed and validated on a thread of its own. The real entry point, one process, in
 * process store: the public listener keeps answering while a reload of a 1 MiB file is worked on.
 */
jest.setTimeout(180_000);

let main: MainProcess | null = null;
afterAll(async () => {
  if (main && main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
  await main?.exited;
});

/** A valid config of just under 1 MiB: many plans and many CORS origins, slow to parse as YAML. */
function bigConfig(): string {
  let text = 'plans:\n';
  for (let i = 0; i < 3000; i++) text += `  plan-${i}: { perMinute: ${i + 10}, perDay: ${i * 10 + 100} }\n`;
  text += 'cors:\n  allowedOrigins:\n';
  for (let i = 0; text.length < 1000 * 1024; i++) text += `    - "https://app-${i}.example"\n`;
  return text;
}

/** GET /v1/pets (401 at once, no key) one after another until stopped; when each answer came. */
function pinger(gatewayUrl: string): { stop(): Promise<number[]> } {
  const answeredAt: number[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let running = true;
  const loop = (async () => {
    while (running) {
      await new Promise<void>((resolve) => {
        http
          .get(`${gatewayUrl}/v1/pets`, { agent }, (res) => {
            res.resume();
            res.on('end', () => {
              answeredAt.push(performance.now());
              resolve();
            });
          })
          .on('error', () => resolve());
      });
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      agent.destroy();
      return answeredAt;
    },
  };
}

test('the public listener keeps answering while a reload reads and validates a 1 MiB config; over 1 MiB is refused naming CONFIG_FILE', async () => {
  const configFile = tempFile('reloaded.yaml', 'cors:\n  allowedOrigins: []\n');
  const env = await isolatedEnv({
    APP_ENV: 'staging',
    ADMIN_TOKEN: LONG_ADMIN_TOKEN,
    SIGNING_SECRET: LONG_SIGNING_SECRET,
    CONFIG_FILE: configFile,
  });
  main = startMain(env);
  await main.waitForStdout(/"msg":"listening/);
  const gatewayUrl = `http://127.0.0.1:${env.PORT}`;
  const reload = async () => {
    const res = await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${LONG_ADMIN_TOKEN}` },
    });
    return {
      status: res.status,
      body: (await res.json()) as { result?: string; errors?: Array<{ setting: string; message: string }> },
    };
  };

  fs.writeFileSync(configFile, bigConfig());
  const pings = pinger(gatewayUrl);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const startedAt = performance.now();
  const outcome = await reload();
  const endedAt = performance.now();
  const answeredAt = await pings.stop();
  expect(outcome).toMatchObject({ status: 200, body: { result: 'success' } });

  // The longest time the listener went without answering while the reload was under way. On the
  // event loop the parse alone was one block of most of the reload; off it, a small part of it.
  const during = [startedAt, ...answeredAt.filter((at) => at > startedAt && at < endedAt), endedAt];
  const longestGap = Math.max(...during.slice(1).map((at, i) => at - during[i]!));
  const reloadMs = endedAt - startedAt;
  process.stdout.write(
    `reload of a 1 MiB config: ${reloadMs.toFixed(0)} ms; ${during.length - 2} answers meanwhile, longest gap ${longestGap.toFixed(0)} ms\n`,
  );
  expect(during.length - 2).toBeGreaterThanOrEqual(5);
  expect(longestGap).toBeLessThan(reloadMs / 3);

  // One byte over 1 MiB: refused before it is read, the config in force unchanged.
  fs.writeFileSync(configFile, `# ${'x'.repeat(1024 * 1024)}\n`);
  const refused = await reload();
  expect(refused.status).toBe(400);
  expect(refused.body.errors).toEqual([
    {
      setting: 'CONFIG_FILE',
      message: expect.stringMatching(/ is \d+ bytes: a config file is at most 1 MiB \(1048576 bytes\)$/),
    },
  ]);
  expect(
    (await fetch(`${gatewayUrl}/v1/pets`, { headers: { origin: 'https://app-7.example' } })).headers.get(
      'access-control-allow-origin',
    ),
  ).toBe('https://app-7.example');
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { expectNoStackTrace, runKeys } from './cli-kit';

/** `npm run keys -- reload` against a running admin listener: POST /admin/reload, as SIGHUP. */
let product: ProductHarness;
let configFile: string;
let cliEnv: Record<string, string>;

beforeAll(async () => {
  configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-cli-reload-')), 'extra.yaml');
  fs.writeFileSync(configFile, 'cors:\n  allowedOrigins: []\n');
  product = await startTestProduct({ env: { CONFIG_FILE: configFile } });
  cliEnv = { ADMIN_URL: product.adminUrl, ADMIN_TOKEN: product.adminToken };
});
afterAll(async () => {
  await product.close();
});

test('a valid change: prints the new hash and what needs a restart, exit 0', async () => {
  fs.writeFileSync(configFile, 'cors:\n  allowedOrigins: ["https://app.example"]\nserver:\n  adminPort: 1\n');
  const run = await runKeys(['reload'], cliEnv);
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  expect(run.stdout).toBe(
    `config reloaded: hash ${product.configState.hash}\nneeds a restart (left as it was): server.adminPort\n`,
  );
  const json = await runKeys(['reload', '--json'], cliEnv);
  expect(JSON.parse(json.stdout)).toEqual({
    result: 'success',
    hash: product.configState.hash,
    restartNeeded: ['server.adminPort'],
  });
});

test('an invalid config: every bad setting on its own line, exit 1, nothing changed', async () => {
  const hash = product.configState.hash;
  fs.writeFileSync(configFile, 'cors:\n  allowedOrigins: ["nope"]\nanonymous:\n  perMinute: 0\n');
  const run = await runKeys(['reload'], cliEnv);
  expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' });
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^error: The configuration was refused \(2 problems\).*\(400 invalid_config\)$/);
  expect(lines.slice(1)).toEqual([
    expect.stringMatching(/^ {2}cors\.allowedOrigins\.0: /),
    expect.stringMatching(/^ {2}anonymous\.perMinute: /),
  ]);
  expectNoStackTrace(run);
  expect(product.configState.hash).toBe(hash);
});

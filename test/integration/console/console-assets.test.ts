import fs from 'node:fs';
import express from 'express';
import request from 'supertest';
import { CONSOLE_SECURITY_HEADERS, consolePublicDir, consoleRouter } from '../../../src/admin/console/console-router';

/**
 * Every file of the console as the router serves it over real HTTP: each ES module as
 * text/javascript (a browser refuses a module script of another type, and nosniff forbids guessing),
 * each under the same strict policy as the page, whose `script-src 'self'` admits module scripts.
 */
const publicDir = consolePublicDir();
const app = express().use('/console', consoleRouter(publicDir));
const modules = fs.readdirSync(publicDir).filter((name) => name.endsWith('.js'));

test('the console is several modules, main.js among them', () => {
  expect(modules).toContain('main.js');
  expect(modules.length).toBeGreaterThan(10);
});

test.each(modules)('%s: 200 text/javascript under the strict policy, byte for byte the file', async (name) => {
  const res = await request(app).get(`/console/${name}`);
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
  for (const [header, value] of Object.entries(CONSOLE_SECURITY_HEADERS))
    expect(res.headers[header.toLowerCase()]).toBe(value);
  expect(res.text).toBe(fs.readFileSync(`${publicDir}/${name}`, 'utf8'));
});

test('the page, its style and its icon keep their types; a file that is not there is a 404 Error body', async () => {
  expect((await request(app).get('/console')).headers['content-type']).toBe('text/html; charset=utf-8');
  expect((await request(app).get('/console/console.css')).headers['content-type']).toBe('text/css; charset=utf-8');
  expect((await request(app).get('/console/favicon.svg')).headers['content-type']).toBe('image/svg+xml');
  const missing = await request(app).get('/console/console.js');
  expect({ status: missing.status, body: missing.body as unknown }).toEqual({
    status: 404,
    body: { code: 'not_found', message: expect.any(String), status: 404 },
  });
  expect(missing.headers['content-security-policy']).toBe(CONSOLE_SECURITY_HEADERS['Content-Security-Policy']);
});

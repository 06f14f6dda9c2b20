import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import request from 'supertest';
import { expressServerClasses } from '../../../src/gateway/express-prototypes';

/**
 * Express gives each req/res the app's prototypes per request; a server built with
 * expressServerClasses creates them with those prototypes already, so Express changes nothing.
 */
describe('expressServerClasses', () => {
  let server: http.Server;
  let url: string;
  const seen: Array<{ reqAtArrival: object | null; resAtArrival: object | null; reqInApp: object | null; resInApp: object | null }> = [];

  beforeAll(async () => {
    const app = express();
    app.get('/v1/things/:id', (req, res) => {
      const last = seen[seen.length - 1]!;
      last.reqInApp = Object.getPrototypeOf(req) as object;
      last.resInApp = Object.getPrototypeOf(res) as object;
      res.status(201).type('application/json').send(JSON.stringify({ path: req.path, id: req.params.id, contentType: req.get('content-type'), app: req.app === app }));
    });
    server = http.createServer({ ...expressServerClasses(app) }, app);
    // Runs before Express sees the request: the prototypes node:http created them with.
    server.prependListener('request', (req, res) => {
      seen.push({ reqAtArrival: Object.getPrototypeOf(req) as object, resAtArrival: Object.getPrototypeOf(res) as object, reqInApp: null, resInApp: null });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('req and res arrive with the prototypes Express gives them, so Express changes neither', async () => {
    await request(url).get('/v1/things/7').expect(201);
    const last = seen[seen.length - 1]!;
    expect(last.reqInApp).toBe(last.reqAtArrival);
    expect(last.resInApp).toBe(last.resAtArrival);
  });

  it('Express request and response methods work as before', async () => {
    const res = await request(url).post('/v1/things/7').send({});
    expect(res.status).toBe(404);
    const ok = await request(url).get('/v1/things/42').set('Content-Type', 'application/json').expect(201);
    expect(ok.body).toEqual({ path: '/v1/things/42', id: '42', contentType: 'application/json', app: true });
    expect(ok.headers['content-type']).toMatch(/^application\/json/);
  });

  it('req and res are still node:http objects', async () => {
    let kinds: boolean[] = [];
    server.prependOnceListener('request', (req, res) => {
      kinds = [req instanceof http.IncomingMessage, res instanceof http.ServerResponse];
    });
    await request(url).get('/v1/things/1').expect(201);
    expect(kinds).toEqual([true, true]);
  });
});

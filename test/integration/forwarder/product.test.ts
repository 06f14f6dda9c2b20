import http from 'node:http';
import request from 'supertest';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';

/** The whole product, once with each forwarder chosen by `upstream.forwarder`: the paths a client sees most. */
describe.each(['undici', 'http-proxy'] as const)('the product with upstream.forwarder = %s', (forwarder) => {
  let product: ProductHarness;
  let auth: string;

  beforeAll(async () => {
    product = await startTestProduct({ overrides: { upstream: { forwarder } } });
    const { key } = await product.keyService.create({ name: 'smoke', plan: 'pro' });
    auth = `Bearer ${key}`;
  });
  afterAll(async () => {
    await product.close();
  });

  it('uses the configured forwarder', () => {
    expect(product.config.upstream.forwarder).toBe(forwarder);
  });

  it('GET /v1/pets is answered by the inventory, with the gateway headers', async () => {
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(Array.isArray(res.body)).toBe(true);
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
    expect(res.headers['x-ratelimit-limit']).toBe('300');
  });

  it('POST /v1/pets creates a pet, and GET finds it', async () => {
    const created = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .send({ name: `Smoke ${forwarder}`, categoryId: 1 })
      .expect(201);
    const pet = created.body as { id: number; name: string };
    expect(pet.name).toBe(`Smoke ${forwarder}`);
    expect(created.headers.location).toEqual(expect.stringContaining(`/v1/pets/${pet.id}`));
    const found = await request(product.gatewayUrl).get(`/v1/pets/${pet.id}`).set('Authorization', auth).expect(200);
    expect((found.body as { id: number }).id).toBe(pet.id);
  });

  it('an unknown pet is the inventory 404, passed on as it is', async () => {
    const res = await request(product.gatewayUrl).get('/v1/pets/999999999').set('Authorization', auth).expect(404);
    expect(res.body).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
  });

  it('a body over 16 KiB is 413, by Content-Length', async () => {
    const res = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ name: 'x'.repeat(17 * 1024), categoryId: 1 }))
      .expect(413);
    expect((res.body as { code: string }).code).toBe('payload_too_large');
  });

  it('a chunked body over 16 KiB is 413 and the connection is closed, and the next request is served', async () => {
    const res = await postChunked(
      product.gatewayUrl,
      auth,
      JSON.stringify({ name: 'x'.repeat(20 * 1024), categoryId: 1 }),
    );
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ code: 'payload_too_large', message: expect.any(String), status: 413 });
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
  });
});

function postChunked(gatewayUrl: string, auth: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${gatewayUrl}/v1/pets`, {
      method: 'POST',
      agent: false,
      headers: { Authorization: auth, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    for (let offset = 0; offset < body.length; offset += 1024) req.write(body.slice(offset, offset + 1024));
    req.end();
  });
}

import request from 'supertest';
import { ManualClock, systemClock } from '../../../src/shared/clock';
import { UPSTREAM_TOKEN_HEADER, UpstreamTokenSigner } from '../../../src/shared/http/upstream-token';
import { countPets, startTestProduct, type ProductHarness } from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/** CONTRACT §7: the inventory trusts only the gateway. Anyone who reaches its port directly gets 401. */
describe('the inventory called directly, around the gateway', () => {
  let product: ProductHarness;
  let inventoryUrl: string;
  const newPet = { name: 'Intruder', categoryId: 1 };

  /** A signer with the product's settings, changed as a forger would. */
  const signer = (changes: { secret?: string; issuer?: string; audience?: string } = {}, clock = systemClock) =>
    new UpstreamTokenSigner({ ...product.config.signing, secret: product.config.signing.secret!, ...changes }, clock);

  beforeAll(async () => {
    product = await startTestProduct();
    inventoryUrl = product.inventory!.url;
  });

  afterAll(async () => {
    await product?.close();
  });

  it('without a gateway token: 401, even with a valid API key', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = countPets(product);
    expectError(await request(inventoryUrl).get('/v1/pets'), 401, 'missing_api_key');
    expectError(await request(inventoryUrl).get('/v1/pets').set('Authorization', auth), 401, 'missing_api_key');
    expectError(
      await request(inventoryUrl).post('/v1/pets').set('Authorization', auth).send(newPet),
      401,
      'missing_api_key',
    );
    expect(countPets(product)).toBe(before);
  });

  it('with a forged, misaddressed or expired token: 401 and nothing written', async () => {
    const before = countPets(product);
    const claims = { keyId: 'key_000000000000000000000000', plan: 'enterprise' };
    const longAgo = new ManualClock(Date.UTC(2020, 0, 1));
    const tokens = {
      'another secret': await signer({ secret: 'not-the-gateway-secret-but-long-enough-0123' }).sign(claims),
      'another audience': await signer({ audience: 'someone-else' }).sign(claims),
      'another issuer': await signer({ issuer: 'mallory' }).sign(claims),
      expired: await signer({}, longAgo).sign(claims),
      garbage: 'not.a.token',
      'an API key': (await createKey(product, { plan: 'free' })).key,
    };
    for (const [label, token] of Object.entries(tokens)) {
      const get = await request(inventoryUrl).get('/v1/pets').set(UPSTREAM_TOKEN_HEADER, token);
      const post = await request(inventoryUrl).post('/v1/pets').set(UPSTREAM_TOKEN_HEADER, token).send(newPet);
      expect({ label, get: get.status, post: post.status, code: (post.body as { code: string }).code }).toEqual({
        label,
        get: 401,
        post: 401,
        code: 'invalid_api_key',
      });
    }
    expect(countPets(product)).toBe(before);
  });

  it('the same request with the gateway’s own token is served: the refusals above are about the token alone', async () => {
    const before = countPets(product);
    const token = await signer().sign({ keyId: 'key_000000000000000000000000', plan: 'free' });
    await request(inventoryUrl).post('/v1/pets').set(UPSTREAM_TOKEN_HEADER, token).send(newPet).expect(201);
    expect(countPets(product)).toBe(before + 1);
  });
});

import { buildDeprecations } from '../../../../src/gateway/operations/deprecation';
import type { DeprecationConfig } from '../../../../src/shared/config';

const getPet: DeprecationConfig = {
  method: 'GET',
  path: '/pets/{petId}',
  deprecatedAt: '2025-12-05T00:00:00Z',
  sunset: '2030-12-05T00:00:00Z',
  successor: '/v1/pets',
  docs: 'https://docs.animalstore.example/deprecations/get-pet',
};

describe('buildDeprecations', () => {
  it('writes RFC 9745 Deprecation, RFC 8594 Sunset and the two Link relations once', () => {
    const notices = buildDeprecations([getPet]);
    expect(notices.get('GET /v1/pets/{petId}')).toEqual({
      id: 'GET /v1/pets/{petId}',
      template: '/v1/pets/{petId}',
      sunsetAt: Date.UTC(2030, 11, 5),
      headers: {
        Deprecation: `@${Date.UTC(2025, 11, 5) / 1000}`,
        Sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
        Link: '</v1/pets>; rel="successor-version", <https://docs.animalstore.example/deprecations/get-pet>; rel="deprecation"; type="text/html"',
      },
    });
  });

  it('reads instants with offsets as the same UTC instant', () => {
    const [notice] = buildDeprecations([
      { ...getPet, deprecatedAt: '2025-12-05T01:00:00+01:00', sunset: '2030-12-04T19:00:00-05:00' },
    ]).values();
    expect(notice!.headers.Deprecation).toBe(`@${Date.UTC(2025, 11, 5) / 1000}`);
    expect(notice!.headers.Sunset).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
    expect(notice!.sunsetAt).toBe(Date.UTC(2030, 11, 5));
  });

  it('drops fractions of a second in Deprecation', () => {
    const [notice] = buildDeprecations([{ ...getPet, deprecatedAt: '2025-12-05T00:00:00.900Z' }]).values();
    expect(notice!.headers.Deprecation).toBe(`@${Date.UTC(2025, 11, 5) / 1000}`);
  });

  it('keeps one notice per method and path; none when config has none', () => {
    const notices = buildDeprecations([getPet, { ...getPet, method: 'POST', path: '/pets' }]);
    expect([...notices.keys()].sort()).toEqual(['GET /v1/pets/{petId}', 'POST /v1/pets']);
    expect(buildDeprecations([]).size).toBe(0);
  });
});

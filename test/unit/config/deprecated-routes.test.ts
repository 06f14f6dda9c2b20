import { ConfigError, loadConfig } from '../../../src/shared/config';
import { ROUTE_TEMPLATES } from '../../../src/gateway/operations/routes';
import { BASE_PATH, OPERATIONS } from '../../../src/shared/public-api';

/**
 * The `route` label of a metric takes ROUTE_TEMPLATES and nothing a config adds: a deprecation
 * can only name an operation of the table (src/shared/public-api.ts), whose route is one of them
 * (src/product/index.ts, labelSetsOf).
 */

const deprecating = (method: string, path: string) => () =>
  loadConfig({
    env: {},
    overrides: {
      deprecations: [
        {
          method,
          path,
          deprecatedAt: '2025-12-05T00:00:00Z',
          sunset: '2030-12-05T00:00:00Z',
          successor: '/v1/pets',
          docs: 'https://docs.animalstore.example/deprecations/x',
        },
      ],
    } as never,
  });

test.each(OPERATIONS.map((operation) => [operation.method, operation.path]))(
  'a deprecation of %s %s is accepted, and its route is a route template',
  (method, path) => {
    const [deprecation] = deprecating(method, path)().deprecations;
    expect(ROUTE_TEMPLATES).toContain(BASE_PATH + deprecation!.path);
  },
);

test.each([
  ['GET', '/orders'],
  ['DELETE', '/pets/{petId}'],
  ['GET', '/pets/'],
  ['PUT', '/usage'],
])('a deprecation of %s %s, no operation of the table, is refused', (method, path) => {
  expect(deprecating(method, path)).toThrow(ConfigError);
});

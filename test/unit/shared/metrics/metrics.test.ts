import { Registry } from 'prom-client';
import { createGatewayMetrics } from '../../../../src/shared/metrics/metrics';
import type { DeprecationConfig } from '../../../../src/shared/config';

/**
 * Issue 16: each deprecation's sunset as a gauge, so that an alert can join the calls to a
 * deprecated route (gateway_deprecated_requests_total{route}) with how close its sunset is.
 */
describe('gateway_deprecation_sunset_timestamp_seconds', () => {
  const deprecation = (method: DeprecationConfig['method'], path: string, sunset: string): DeprecationConfig => ({
    method,
    path,
    deprecatedAt: '2025-12-05T00:00:00Z',
    sunset,
    successor: '/v1/pets',
    docs: 'https://docs.example/deprecations',
  });

  it('exports one sample per deprecation in force: its sunset in Unix seconds, under the route template the request metrics use', async () => {
    let inForce = [
      deprecation('GET', '/pets/{petId}', '2030-12-05T00:00:00Z'),
      deprecation('POST', '/pets', '2031-01-01T12:00:00Z'),
    ];
    const metrics = createGatewayMetrics(new Registry(), {
      deprecations: () => inForce,
    });
    const text = await metrics.registry.getSingleMetricAsString('gateway_deprecation_sunset_timestamp_seconds');
    const samples = text.split('\n').filter((line) => line.startsWith('gateway_deprecation_sunset_timestamp_seconds{'));
    expect(samples.sort()).toEqual([
      `gateway_deprecation_sunset_timestamp_seconds{method="GET",route="/v1/pets/{petId}"} ${Date.UTC(2030, 11, 5) / 1000}`,
      `gateway_deprecation_sunset_timestamp_seconds{method="POST",route="/v1/pets"} ${Date.UTC(2031, 0, 1, 12) / 1000}`,
    ]);
    // A reload that removes one: the next scrape no longer has it.
    inForce = [inForce[1]!];
    const after = await metrics.registry.getSingleMetricAsString('gateway_deprecation_sunset_timestamp_seconds');
    expect(
      after.split('\n').filter((line) => line.startsWith('gateway_deprecation_sunset_timestamp_seconds{')),
    ).toEqual([
      `gateway_deprecation_sunset_timestamp_seconds{method="POST",route="/v1/pets"} ${Date.UTC(2031, 0, 1, 12) / 1000}`,
    ]);
  });

  it('exports no sample without deprecations', async () => {
    const metrics = createGatewayMetrics(new Registry(), {});
    const text = await metrics.registry.getSingleMetricAsString('gateway_deprecation_sunset_timestamp_seconds');
    expect(text.split('\n').filter((line) => line.startsWith('gateway_deprecation_sunset_timestamp_seconds{'))).toEqual(
      [],
    );
  });
});

import { ManualClock } from '../../../../src/shared/clock';
import type { DeprecationConfig } from '../../../../src/shared/config';
import { buildDeprecations } from '../../../../src/gateway/operations/deprecation';
import { createSunsetStep } from '../../../../src/gateway/steps/sunset';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import { counted, countedInAll, gatewayRequest, incoming, keyRecord, stepEnvironment } from './step-kit';

const SUNSET = Date.UTC(2026, 5, 1);
const deprecation: DeprecationConfig = {
  method: 'GET',
  path: '/pets/{petId}',
  deprecatedAt: '2026-01-01T00:00:00Z',
  sunset: new Date(SUNSET).toISOString(),
  successor: '/v2/pets/{petId}',
  docs: 'https://docs.example/deprecations',
};
const notice = buildDeprecations([deprecation]).get('GET /v1/pets/{petId}')!;
const key = keyRecord({ plan: 'pro' });

function setUp(now: number, withUsage = true) {
  const { metrics } = stepEnvironment();
  const clock = new ManualClock(now);
  const deprecationUsage = { record: jest.fn() };
  const applySunset = createSunsetStep({ metrics, clock, deprecationUsage: withUsage ? deprecationUsage : undefined });
  return { metrics, clock, deprecationUsage, applySunset };
}

/** A request of the caller `key` whose operation match-operation found deprecated. */
const deprecatedRequest = () =>
  gatewayRequest(incoming('GET', '/v1/pets/7'), { deprecation: notice, key, keyId: key.id, plan: key.plan });

describe('sunset step', () => {
  it('an operation that is not deprecated continues, uncounted', async () => {
    const { applySunset, metrics, deprecationUsage } = setUp(SUNSET + 1);
    expect(applySunset(gatewayRequest(incoming('GET', '/v1/pets'), { key, keyId: key.id, plan: 'pro' }))).toBe(
      CONTINUE,
    );
    expect(await countedInAll(metrics.deprecatedRequests)).toBe(0);
    expect(deprecationUsage.record).not.toHaveBeenCalled();
  });

  it('before its sunset a deprecated operation continues, counted by route and plan and recorded under its operation id', async () => {
    const { applySunset, metrics, deprecationUsage } = setUp(SUNSET - 1);
    expect(applySunset(deprecatedRequest())).toBe(CONTINUE);
    expect(await counted(metrics.deprecatedRequests, { route: '/v1/pets/{petId}', plan: 'pro' })).toBe(1);
    expect(deprecationUsage.record).toHaveBeenCalledWith('GET /v1/pets/{petId}', key.id);
  });

  it.each([
    ['at', SUNSET],
    ['after', SUNSET + 86_400_000],
  ])('%s its sunset it is 410 gone, and still counted', async (_when, now) => {
    const { applySunset, metrics, deprecationUsage } = setUp(now);
    expect(applySunset(deprecatedRequest())).toEqual(
      new Refusal('gone', 'This operation has passed its sunset date. Use the successor version.'),
    );
    expect(await counted(metrics.deprecatedRequests, { route: '/v1/pets/{petId}', plan: 'pro' })).toBe(1);
    expect(deprecationUsage.record).toHaveBeenCalledWith('GET /v1/pets/{petId}', key.id);
  });

  it('works without a deprecation-usage recorder', async () => {
    const { applySunset, metrics, clock } = setUp(SUNSET - 1, false);
    expect(applySunset(deprecatedRequest())).toBe(CONTINUE);
    clock.set(SUNSET);
    expect(applySunset(deprecatedRequest())).toMatchObject({ code: 'gone' });
    expect(await counted(metrics.deprecatedRequests, { route: '/v1/pets/{petId}', plan: 'pro' })).toBe(2);
  });
});

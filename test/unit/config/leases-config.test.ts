import { loadConfig, planReload } from '../../../src/shared/config';

/** Config `rateLimit.leases` (docs/configuration.md; src/limits/leases/): defaults, bounds, reloadable. */

const env = { ADMIN_TOKEN: 'a'.repeat(40), SIGNING_SECRET: 's'.repeat(40) };

describe('rateLimit.leases', () => {
  it('is on by default, a key busy at 50 requests/s per instance; a file may set either field alone', () => {
    expect(loadConfig({ env }).rateLimit.leases).toEqual({ enabled: true, busyRequestsPerSecond: 50 });
    const off = loadConfig({ env, overrides: { rateLimit: { leases: { enabled: false } } } });
    expect(off.rateLimit.leases).toEqual({ enabled: false, busyRequestsPerSecond: 50 });
  });

  it('refuses a busy rate under 5 and a switch that is not true or false, naming the setting', () => {
    expect(() => loadConfig({ env, overrides: { rateLimit: { leases: { busyRequestsPerSecond: 2 } } } })).toThrow(
      /rateLimit\.leases\.busyRequestsPerSecond/,
    );
    expect(() => loadConfig({ env, overrides: { rateLimit: { leases: { enabled: 'yes' } } } })).toThrow(
      /rateLimit\.leases\.enabled/,
    );
  });

  it('is reloadable: a reload applies it with no restart', () => {
    const current = loadConfig({ env });
    const next = structuredClone(current);
    next.rateLimit.leases = { enabled: false, busyRequestsPerSecond: 200 };
    const plan = planReload(current, next);
    expect(plan.applied).toEqual(['rateLimit.leases']);
    expect(plan.restartNeeded).toEqual([]);
    expect(plan.inForce.rateLimit.leases).toEqual({ enabled: false, busyRequestsPerSecond: 200 });
  });
});

import { planViews } from '../../../src/admin/plans-route';

test('each configured plan in the config order, a per-key plan with null limits, shadow false unless set', () => {
  expect(
    planViews({
      free: { perMinute: 60, perDay: 1000 },
      trial: { perMinute: 5, perDay: 50, shadow: true },
      enterprise: {},
    }),
  ).toEqual([
    { name: 'free', perMinute: 60, perDay: 1000, shadow: false },
    { name: 'trial', perMinute: 5, perDay: 50, shadow: true },
    { name: 'enterprise', perMinute: null, perDay: null, shadow: false },
  ]);
});

test('no plan configured: an empty list', () => {
  expect(planViews({})).toEqual([]);
});

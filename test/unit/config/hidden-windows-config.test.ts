import { ConfigError, loadConfig } from '../../../src/shared/config';

/** `plans.<name>.hiddenWindows` (CONTRACT §4): window names only, each refusal naming the setting. */

const withPlan = (plan: Record<string, unknown>) => () =>
  loadConfig({ env: {}, overrides: { plans: { gold: plan } } as never });

test('a plan may hide any of minute, day and month', () => {
  expect(
    withPlan({ perMinute: 5, perDay: 50, hiddenWindows: ['minute', 'month'] })().plans.gold!.hiddenWindows,
  ).toEqual(['minute', 'month']);
});

test.each([
  [['hour'], 'invalid setting plans.gold.hiddenWindows.0: must be minute, day or month'],
  [['minute', 'consumer-day'], 'invalid setting plans.gold.hiddenWindows.1: must be minute, day or month'],
  ['minute', 'invalid setting plans.gold.hiddenWindows'],
])('hiddenWindows %j is refused, named', (hiddenWindows, message) => {
  const load = withPlan({ perMinute: 5, perDay: 50, hiddenWindows });
  expect(load).toThrow(ConfigError);
  expect(load).toThrow(message);
});

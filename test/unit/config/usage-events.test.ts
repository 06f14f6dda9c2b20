import { ConfigError, loadConfig, redactedConfig, REDACTED } from '../../../src/shared/config';

/** Config `usageEvents` (issue 53): off by default; each problem one line naming the setting; the sink's credentials never shown. */

function refusal(usageEvents: Record<string, unknown>): string[] {
  try {
    loadConfig({ env: {}, overrides: { usageEvents } as never });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message.split('\n').filter((line) => line.includes('usageEvents'));
  }
  return [];
}

test('off by default, hourly, units and requests', () => {
  const { usageEvents } = loadConfig({ env: {} });
  expect(usageEvents).toEqual(
    expect.objectContaining({
      enabled: false,
      url: null,
      period: 'hour',
      meters: ['units', 'requests'],
      graceSeconds: 15,
    }),
  );
});

test.each([
  ['enabled without a sink', { enabled: true }, 'usageEvents.url: is required when usageEvents.enabled is true'],
  ['a period that is neither', { period: 'day' }, 'usageEvents.period: must be minute or hour'],
  [
    'a test period that does not divide the day',
    { periodSeconds: 7 },
    'usageEvents.periodSeconds: must divide a day (86400 seconds), so that each period lies in one UTC day',
  ],
  ['an unknown meter', { meters: ['bytes'] }, 'usageEvents.meters.0: must be one of units, requests, refusals'],
  [
    'a token file that cannot be read',
    { tokenFile: '/nonexistent/usage-token' },
    'usageEvents.tokenFile: /nonexistent/usage-token cannot be read (ENOENT)',
  ],
])('%s is refused, naming the setting', (_name, usageEvents, expected) => {
  const lines = refusal(usageEvents);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain(expected);
});

test("GET /admin/config shows the sink's header names and its URL, never a header's value nor the URL's token", () => {
  const config = loadConfig({
    env: {},
    overrides: {
      usageEvents: {
        enabled: true,
        url: 'https://ingest.example/api/v1/events?token=s3cr3t',
        headers: { authorization: 'Bearer om_live_123' },
      },
    } as never,
  });
  const shown = redactedConfig(config).usageEvents;
  expect(shown.headers).toEqual({ authorization: REDACTED });
  expect(JSON.stringify(shown)).not.toContain('s3cr3t');
  expect(JSON.stringify(shown)).not.toContain('om_live_123');
  // The config in force keeps them.
  expect(config.usageEvents.headers.authorization).toBe('Bearer om_live_123');
});

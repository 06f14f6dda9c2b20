import { loadConfig, webhookTargetProblems, type HostLookup } from '../../../src/shared/config';

/**
 * Issue 48 (item 7): a receiver whose name resolves to this gateway's admin listener is refused at
 * start and on reload, as one whose URL shows it is at load. The resolver is given: the suite in
 * test/integration/notifications/webhooks-reload.test.ts resolves a real name from /etc/hosts.
 */

const SECRET = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const ADMIN = { host: '127.0.0.1', port: 9100 };

const notificationsTo = (...urls: string[]) =>
  loadConfig({
    env: {},
    overrides: { notifications: { webhooks: urls.map((url) => ({ url, secret: SECRET })) } } as never,
  }).notifications;

/** A resolver answering from a table, counting what it is asked. */
function resolverOf(table: Record<string, string[]>): HostLookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (host: string) => {
    asked.push(host);
    return table[host] ?? [];
  };
  return Object.assign(lookup, { asked });
}

test('a name resolving to loopback (either family, mapped included) on the admin port is refused, naming the setting and the address', async () => {
  const lookup = resolverOf({
    'hooks.internal': ['10.0.0.9', '127.0.0.1'],
    'v6.internal': ['::1'],
    'mapped.internal': ['::ffff:127.0.0.5'],
  });
  const problems = await webhookTargetProblems(
    notificationsTo('http://hooks.internal:9100/x', 'http://v6.internal:9100/y', 'http://mapped.internal:9100/z'),
    ADMIN,
    lookup,
  );
  expect(problems).toEqual([
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:9100) (hooks.internal resolves to 127.0.0.1); a receiver must be another service",
    "invalid setting notifications.webhooks.1.url: points at this gateway's admin listener (127.0.0.1:9100) (v6.internal resolves to ::1); a receiver must be another service",
    "invalid setting notifications.webhooks.2.url: points at this gateway's admin listener (127.0.0.1:9100) (mapped.internal resolves to ::ffff:127.0.0.5); a receiver must be another service",
  ]);
});

test('an admin listener on a wildcard: a name resolving to any address of this machine is refused; on its own address, that address', async () => {
  const lookup = resolverOf({ 'self.internal': ['127.0.0.1'], 'admin.internal': ['192.0.2.10'] });
  expect(
    await webhookTargetProblems(
      notificationsTo('https://self.internal:9100/'),
      { host: '0.0.0.0', port: 9100 },
      lookup,
    ),
  ).toHaveLength(1);
  expect(
    await webhookTargetProblems(
      notificationsTo('http://admin.internal:9100/'),
      { host: '192.0.2.10', port: 9100 },
      lookup,
    ),
  ).toHaveLength(1);
});

test("the port the admin listener listens on counts, not the config's (a literal address too); another port, another address, or no answer passes without a lookup where none is needed", async () => {
  const lookup = resolverOf({ 'hooks.internal': ['127.0.0.1'], 'far.internal': ['198.51.100.7'] });
  expect(
    await webhookTargetProblems(notificationsTo('http://[::ffff:127.0.0.1]:9100/admin/reload'), ADMIN, lookup),
  ).toHaveLength(1);
  const passing = notificationsTo(
    'http://hooks.internal:9101/x',
    'http://far.internal:9100/y',
    'http://gone.internal:9100/z',
    'http://[::ffff:127.0.0.1]:9101/',
  );
  expect(await webhookTargetProblems(passing, ADMIN, lookup)).toEqual([]);
  // A receiver on another port than the admin listener's is not looked up at all.
  expect(lookup.asked).toEqual(['far.internal', 'gone.internal']);
});

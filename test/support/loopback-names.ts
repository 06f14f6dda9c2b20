import fs from 'node:fs';

/**
 * A name other than `localhost` that this machine's /etc/hosts gives a loopback address
 * (`ip6-localhost` on Debian and in containers, the host's own name on others): a name that
 * dns.lookup resolves to loopback, as a DNS name pointing at 127.0.0.1 would. Throws when there is
 * none, so that a test needing one fails rather than passes without it.
 */
export function loopbackNameFromHosts(): string {
  const names = fs
    .readFileSync('/etc/hosts', 'utf8')
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim().split(/\s+/))
    .filter(([address]) => address !== undefined && (address.startsWith('127.') || address === '::1'))
    .flatMap(([, ...hostNames]) => hostNames)
    .filter((name) => name !== '' && !/^localhost\.?$/i.test(name));
  if (names.length === 0) throw new Error('/etc/hosts gives no name but localhost a loopback address');
  return names[0]!;
}

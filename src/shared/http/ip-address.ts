import net from 'node:net';

/**
 * One IP address, however it was written, as one text: what the gateway compares, counts and
 * matches by. Imports nothing of ours, so the config, the gateway, the admin API and the
 * notifications can all use it.
 */

const GROUPS = 8;
const IPV4_TAIL = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/;

/** The eight 16-bit groups of an IPv6 address that net.isIPv6 accepts (no zone id). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const tail: number[] = [];
  const ipv4 = IPV4_TAIL.exec(text);
  if (ipv4) {
    const [a, b, c, d] = ipv4[2]!.split('.').map(Number) as [number, number, number, number];
    tail.push((a << 8) | b, (c << 8) | d);
    text = ipv4[1]!.endsWith('::') ? ipv4[1]! : ipv4[1]!.slice(0, -1);
  }
  const [head = '', rest] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const front = parse(head);
  const back = [...(rest === undefined ? [] : parse(rest)), ...tail];
  if (rest === undefined) return [...front, ...tail];
  return [...front, ...Array<number>(GROUPS - front.length - back.length).fill(0), ...back];
}

/** RFC 5952 text: lower case, no leading zeros, the first longest run of two or more zero groups as `::`. */
function ipv6Text(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < GROUPS;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < GROUPS && groups[end] === 0) end++;
    if (end - i > bestLength) [bestStart, bestLength] = [i, end - i];
    i = end;
  }
  const hex = groups.map((group) => group.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

function ipv4Text(high: number, low: number): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/**
 * An IPv4 address embedded in IPv6: mapped (`::ffff:a.b.c.d`, the form a dual-stack socket shows an
 * IPv4 peer in) or compatible (`::a.b.c.d`, deprecated, but still an IPv4 host). Null otherwise.
 * `::` and `::1` are not compatible addresses, nor is anything with zeros in its upper 16 bits of
 * the last 32 (`::2`): those stay IPv6.
 */
function embeddedIpv4(groups: readonly number[]): string | null {
  if (groups.slice(0, 5).some((group) => group !== 0)) return null;
  if (groups[5] === 0xffff) return ipv4Text(groups[6]!, groups[7]!);
  if (groups[5] === 0 && groups[6] !== 0) return ipv4Text(groups[6]!, groups[7]!);
  return null;
}

/**
 * The canonical text of an IP address, or null when `text` is not one: brackets and an IPv6 zone
 * id (`%eth0`) dropped, IPv4-mapped and IPv4-compatible IPv6 as their IPv4 address, other IPv6 in
 * RFC 5952 form (`0:0:0:0:0:0:0:1` is `::1`). Only dotted-decimal IPv4 is taken, as net.isIP takes
 * it (a URL's host is already in that form: the URL parser turns `0x7f.1` into `127.0.0.1`).
 */
export function canonicalAddress(text: string): string | null {
  let address = text.trim().toLowerCase();
  if (address.startsWith('[') && address.endsWith(']')) address = address.slice(1, -1);
  if (address.includes(':')) address = address.replace(/%.*$/, '');
  const version = net.isIP(address);
  if (version === 4) return address;
  if (version !== 6) return null;
  const groups = ipv6Groups(address);
  return embeddedIpv4(groups) ?? ipv6Text(groups);
}

/** Loopback, and the unspecified addresses a connection to which reaches this machine. */
const LOCAL_ADDRESSES = new net.BlockList();
LOCAL_ADDRESSES.addSubnet('127.0.0.0', 8, 'ipv4');
LOCAL_ADDRESSES.addSubnet('0.0.0.0', 8, 'ipv4');
LOCAL_ADDRESSES.addAddress('::1', 'ipv6');
LOCAL_ADDRESSES.addAddress('::', 'ipv6');

/** Whether a connection to this address stays on this machine (127.0.0.0/8, ::1, 0.0.0.0, ::), in any of its forms. */
export function isLocalAddress(text: string): boolean {
  const address = canonicalAddress(text);
  return address !== null && LOCAL_ADDRESSES.check(address, address.includes(':') ? 'ipv6' : 'ipv4');
}

/**
 * Who a limit counts against: an IPv4 address alone, an IPv6 address by its /64 (one host, or one
 * subscriber, usually holds a whole /64: counting single IPv6 addresses would let it rotate through
 * 2^64 of them). `::ffff:a.b.c.d` counts as `a.b.c.d`; a zone id is dropped. Text that is no IP
 * address (`unknown`) is its own group.
 */
export function addressGroup(text: string): string {
  const address = canonicalAddress(text);
  if (address === null) return text;
  if (!address.includes(':')) return address;
  return `${ipv6Groups(address)
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

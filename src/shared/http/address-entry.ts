import net from 'node:net';

/** One entry of `allowedAddresses` as the gateway matches it: an address, or a CIDR range. */
export interface AddressEntry {
  /** The network address, IPv4 dotted or IPv6 as written (lower case). */
  address: string;
  family: 'ipv4' | 'ipv6';
  /** Prefix length of a range; null for a single address. */
  prefix: number | null;
}

const PREFIX = /^\d{1,3}$/;
const MAPPED = '::ffff:';
/** An IPv4-mapped IPv6 range is an IPv4 range 96 bits further in. */
const MAPPED_PREFIX_BITS = 96;

/**
 * Parses `10.0.0.0/8`, `192.0.2.7`, `2001:db8::/32`, `::1`: what node's net.isIP calls an address,
 * optionally followed by `/` and a prefix length within its family (0..32, 0..128). Anything else
 * (a hostname, `300.1.1.1/8`, `10.0.0.0/33`, `::1/129`, a zone id) is null. An IPv4-mapped IPv6
 * address or range (`::ffff:10.0.0.0/104`) becomes the IPv4 one it maps, so that it reads as the
 * client address does (src/gateway/client-address.ts strips the mapping too).
 */
export function parseAddressEntry(text: string): AddressEntry | null {
  const trimmed = text.trim().toLowerCase();
  const slash = trimmed.indexOf('/');
  const address = slash === -1 ? trimmed : trimmed.slice(0, slash);
  const prefixText = slash === -1 ? null : trimmed.slice(slash + 1);
  // net.isIP takes a zone id (`fe80::1%eth0`); a client address never carries one, so no list may.
  const version = address.includes('%') ? 0 : net.isIP(address);
  if (version === 0) return null;
  if (prefixText !== null && !PREFIX.test(prefixText)) return null;
  const prefix = prefixText === null ? null : Number(prefixText);
  if (version === 4) return prefix !== null && prefix > 32 ? null : { address, family: 'ipv4', prefix };
  if (prefix !== null && prefix > 128) return null;
  if (address.startsWith(MAPPED) && net.isIPv4(address.slice(MAPPED.length))) {
    if (prefix === null) return { address: address.slice(MAPPED.length), family: 'ipv4', prefix: null };
    if (prefix >= MAPPED_PREFIX_BITS)
      return { address: address.slice(MAPPED.length), family: 'ipv4', prefix: prefix - MAPPED_PREFIX_BITS };
  }
  return { address, family: 'ipv6', prefix };
}

/** The entry as stored and shown: `address` or `address/prefix`. */
export function formatAddressEntry(entry: AddressEntry): string {
  return entry.prefix === null ? entry.address : `${entry.address}/${entry.prefix}`;
}

/**
 * Every entry in one node BlockList, which matches addresses and subnets of both families (and an
 * IPv4-mapped IPv6 client against IPv4 rules). Built once per record (access-policy.ts).
 */
export function addressMatcher(entries: readonly AddressEntry[]): net.BlockList {
  const list = new net.BlockList();
  for (const entry of entries) {
    if (entry.prefix === null) list.addAddress(entry.address, entry.family);
    else list.addSubnet(entry.address, entry.prefix, entry.family);
  }
  return list;
}

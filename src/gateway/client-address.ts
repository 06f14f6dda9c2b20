import type { BlockList } from 'node:net';
import { addressMatcher, parseAddressEntry, type AddressEntry } from '../shared/http/address-entry';
import { canonicalAddress } from '../shared/http/ip-address';

/**
 * The address a request came from: the socket's, or the nearest untrusted hop of
 * X-Forwarded-For when the socket belongs to a configured trusted proxy. `server.trustedProxies`
 * is read as `allowedAddresses` is (src/shared/http/address-entry.ts): addresses and CIDR ranges of
 * both families, in any of their written forms; every address is compared in its canonical form
 * (src/shared/http/ip-address.ts), so `::ffff:127.0.0.1` and `127.0.0.1` are one client.
 */
export class ClientAddressResolver {
  private readonly trusted: BlockList;

  constructor(trustedProxies: readonly string[]) {
    // The config refuses an entry that is not an address or range (schema.ts): none is dropped here.
    this.trusted = addressMatcher(
      trustedProxies.map(parseAddressEntry).filter((entry): entry is AddressEntry => entry !== null),
    );
  }

  /** Whether the socket belongs to a configured trusted proxy, whose own headers are believed. */
  isTrusted(socketAddress: string | undefined): boolean {
    return this.isProxy(canonicalAddress(socketAddress ?? ''));
  }

  resolve(socketAddress: string | undefined, forwardedFor: string | string[] | undefined): string {
    const raw = socketAddress ?? 'unknown';
    const canonical = canonicalAddress(raw);
    const socket = canonical ?? raw;
    if (forwardedFor === undefined || !this.isProxy(canonical)) return socket;
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
      .split(',')
      .map((hop) => hop.trim())
      .filter((hop) => hop.length > 0);
    // Walk from the nearest hop back, skipping our own proxies; the first stranger is the client.
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = canonicalAddress(hops[i]!);
      // A hop that is no address was not written by a proxy of ours: nothing before it is believed.
      if (hop === null) return socket;
      if (!this.isProxy(hop)) return hop;
    }
    return (hops[0] !== undefined && canonicalAddress(hops[0])) || socket;
  }

  private isProxy(address: string | null): boolean {
    return address !== null && this.trusted.check(address, address.includes(':') ? 'ipv6' : 'ipv4');
  }
}

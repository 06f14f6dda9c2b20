import net from 'node:net';

/**
 * The address a request came from: the socket's, or the nearest untrusted hop of
 * X-Forwarded-For when the socket belongs to a configured trusted proxy.
 */
export class ClientAddressResolver {
  private readonly trusted: Set<string>;

  constructor(trustedProxies: string[]) {
    this.trusted = new Set(trustedProxies.map(normalise));
  }

  resolve(socketAddress: string | undefined, forwardedFor: string | string[] | undefined): string {
    const socket = normalise(socketAddress ?? 'unknown');
    if (!this.trusted.has(socket) || forwardedFor === undefined) return socket;
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
      .split(',')
      .map((hop) => normalise(hop.trim()))
      .filter((hop) => hop.length > 0);
    // Walk from the nearest hop back, skipping our own proxies; the first stranger is the client.
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      if (!this.trusted.has(hop)) return net.isIP(hop) ? hop : socket;
    }
    return hops[0] && net.isIP(hops[0]) ? hops[0] : socket;
  }
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one client. */
function normalise(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

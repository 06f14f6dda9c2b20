import os from 'node:os';
import { canonicalAddress, isLocalAddress } from './ip-address';

/**
 * Where this gateway's admin listener answers: config `server.adminHost` and the port it listens
 * on. Nothing the gateway sends on its own (a webhook) may reach it: a signed POST to
 * `/admin/reload` or `/admin/keys` from the gateway itself could only be a mistake or an attack.
 */
export interface AdminListenerAddress {
  host: string;
  port: number;
}

const WILDCARD_ADDRESSES = new Set(['0.0.0.0', '::']);

/** This machine's own addresses, which an admin listener on 0.0.0.0 (or ::) answers on. */
function ownAddresses(): Set<string> {
  const addresses = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const entry of list ?? []) addresses.add(canonicalAddress(entry.address) ?? entry.address);
  }
  return addresses;
}

/** `localhost` and every name under it (RFC 6761): this machine, whatever a resolver answers. */
export function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Whether a connection to `address`:`port` reaches the admin listener: on its port, an address of
 * this machine's loopback (127.0.0.0/8, ::1, 0.0.0.0, ::) in any written form (IPv4-mapped
 * `::ffff:127.0.0.1`, IPv4-compatible `::127.0.0.1`, `0:0:0:0:0:0:0:1`), the admin host's own
 * address, or any address of this machine when the admin host is a wildcard. `address` must be
 * an IP address (a name is resolved first); anything else reaches nothing.
 */
export function reachesAdminListener(address: string, port: number, admin: AdminListenerAddress): boolean {
  if (port !== admin.port) return false;
  const target = canonicalAddress(address);
  if (target === null) return false;
  if (isLocalAddress(target)) return true;
  const adminHost = canonicalAddress(admin.host);
  if (adminHost === null) return false;
  if (target === adminHost) return true;
  return WILDCARD_ADDRESSES.has(adminHost) && ownAddresses().has(target);
}

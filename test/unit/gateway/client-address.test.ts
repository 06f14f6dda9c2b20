import { ClientAddressResolver } from '../../../src/gateway/client-address';

describe('ClientAddressResolver', () => {
  describe('without trusted proxies', () => {
    const resolver = new ClientAddressResolver([]);

    it('is the socket address, whatever X-Forwarded-For claims', () => {
      expect(resolver.resolve('198.51.100.7', '203.0.113.1')).toBe('198.51.100.7');
      expect(resolver.resolve('198.51.100.7', undefined)).toBe('198.51.100.7');
    });

    it('reads an IPv4-mapped IPv6 socket address as IPv4', () => {
      expect(resolver.resolve('::ffff:127.0.0.1', undefined)).toBe('127.0.0.1');
    });

    it('keeps a plain IPv6 address', () => {
      expect(resolver.resolve('2001:db8::1', '203.0.113.1')).toBe('2001:db8::1');
    });

    it('names a missing socket address rather than failing', () => {
      expect(resolver.resolve(undefined, undefined)).toBe('unknown');
    });
  });

  describe('behind trusted proxies', () => {
    const resolver = new ClientAddressResolver(['127.0.0.1', '10.0.0.2']);

    it('believes X-Forwarded-For from a trusted socket', () => {
      expect(resolver.resolve('127.0.0.1', '203.0.113.1')).toBe('203.0.113.1');
      expect(resolver.resolve('::ffff:127.0.0.1', '203.0.113.1')).toBe('203.0.113.1');
    });

    it('takes the nearest hop that is not one of ours, not a client-chosen leftmost one', () => {
      // The client wrote 6.6.6.6 itself; 203.0.113.1 is what our proxy 10.0.0.2 saw.
      expect(resolver.resolve('127.0.0.1', '6.6.6.6, 203.0.113.1, 10.0.0.2')).toBe('203.0.113.1');
    });

    it('joins repeated X-Forwarded-For headers in order', () => {
      expect(resolver.resolve('127.0.0.1', ['6.6.6.6', '203.0.113.1'])).toBe('203.0.113.1');
    });

    it('falls back to the socket when the nearest stranger is not an IP address', () => {
      expect(resolver.resolve('127.0.0.1', '203.0.113.1, not-an-ip')).toBe('127.0.0.1');
    });

    it('takes the first hop when every hop is a trusted proxy', () => {
      expect(resolver.resolve('127.0.0.1', '10.0.0.2, 127.0.0.1')).toBe('10.0.0.2');
    });

    it('ignores empty hops and whitespace', () => {
      expect(resolver.resolve('127.0.0.1', ' , 203.0.113.9 ,, ')).toBe('203.0.113.9');
    });

    it('is the socket when no header is sent, or the header is empty', () => {
      expect(resolver.resolve('127.0.0.1', undefined)).toBe('127.0.0.1');
      expect(resolver.resolve('127.0.0.1', '')).toBe('127.0.0.1');
    });

    it('ignores X-Forwarded-For from a socket that is not trusted', () => {
      expect(resolver.resolve('192.0.2.50', '203.0.113.1')).toBe('192.0.2.50');
    });
  });

  /** Issue 48 (item 8): trustedProxies read as allowedAddresses is, ranges and every written form included. */
  describe('trusted proxies given as ranges and in any written form', () => {
    it('believes X-Forwarded-For from a socket inside a trusted CIDR range, of either family', () => {
      const resolver = new ClientAddressResolver(['10.0.0.0/8', '::1/128', '2001:db8:aa::/48']);
      expect(resolver.resolve('10.20.30.40', '203.0.113.1')).toBe('203.0.113.1');
      expect(resolver.resolve('::ffff:10.20.30.40', '203.0.113.1')).toBe('203.0.113.1');
      expect(resolver.resolve('::1', '203.0.113.2')).toBe('203.0.113.2');
      expect(resolver.resolve('2001:db8:aa:5::9', '203.0.113.3')).toBe('203.0.113.3');
      expect(resolver.resolve('11.0.0.1', '203.0.113.1')).toBe('11.0.0.1');
      expect(resolver.isTrusted('10.255.0.1')).toBe(true);
      expect(resolver.isTrusted('192.0.2.1')).toBe(false);
    });

    it('skips hops inside a trusted range on the way back to the client', () => {
      const resolver = new ClientAddressResolver(['127.0.0.1', '10.0.0.0/8']);
      expect(resolver.resolve('127.0.0.1', '6.6.6.6, 203.0.113.4, 10.1.2.3, 10.9.9.9')).toBe('203.0.113.4');
    });

    it('matches a non-canonical IPv6 entry, and an IPv4-mapped one, against the socket as it comes', () => {
      const resolver = new ClientAddressResolver([
        '0:0:0:0:0:0:0:1',
        '::FFFF:192.0.2.10',
        '2001:0DB8:0000:0000:0000:0000:0000:0001',
      ]);
      expect(resolver.resolve('::1', '203.0.113.5')).toBe('203.0.113.5');
      expect(resolver.resolve('192.0.2.10', '203.0.113.6')).toBe('203.0.113.6');
      expect(resolver.resolve('2001:db8::1', '203.0.113.7')).toBe('203.0.113.7');
    });

    it('gives the client address in its canonical form: no zone id, no IPv4 mapping, RFC 5952 IPv6', () => {
      const resolver = new ClientAddressResolver(['127.0.0.1']);
      expect(resolver.resolve('127.0.0.1', '2001:DB8:0:0:0:0:0:7')).toBe('2001:db8::7');
      expect(resolver.resolve('127.0.0.1', 'fe80::1%eth0')).toBe('fe80::1');
      expect(resolver.resolve('127.0.0.1', '::ffff:198.51.100.4')).toBe('198.51.100.4');
      expect(resolver.resolve('fe80::2%lo', undefined)).toBe('fe80::2');
    });
  });
});

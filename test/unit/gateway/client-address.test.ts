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
});

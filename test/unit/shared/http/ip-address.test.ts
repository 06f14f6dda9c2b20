import { addressGroup, canonicalAddress, isLocalAddress } from '../../../../src/shared/http/ip-address';

/** Issue 48 (items 7, 8, 13): one address, however it is written, is one text. */
describe('canonicalAddress', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::1', '::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['[::1]', '::1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:0db8:0000:0001:0000:0000:0000:0007', '2001:db8:0:1::7'],
    ['fe80::1%eth0', 'fe80::1'],
    ['[fe80::1%25eth0]', 'fe80::1'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::ffff:7f00:1', '127.0.0.1'],
    ['[::ffff:10.1.2.3]', '10.1.2.3'],
    ['::127.0.0.1', '127.0.0.1'],
    ['::7f00:1', '127.0.0.1'],
    ['::', '::'],
    ['::2', '::2'],
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
  ])('%s is %s', (text, canonical) => {
    expect(canonicalAddress(text)).toBe(canonical);
  });

  it.each(['localhost', 'not-an-ip', '300.1.1.1', '10.0.0.0/8', '', 'unknown'])('%s is no address', (text) => {
    expect(canonicalAddress(text)).toBeNull();
  });
});

describe('isLocalAddress', () => {
  it('is loopback and the unspecified addresses in every form', () => {
    for (const address of [
      '127.0.0.1',
      '127.8.9.10',
      '::1',
      '0:0:0:0:0:0:0:1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:2',
      '::127.0.0.1',
      '0.0.0.0',
      '::',
    ]) {
      expect({ address, local: isLocalAddress(address) }).toEqual({ address, local: true });
    }
    for (const address of ['10.0.0.1', '::2', '2001:db8::1', '::ffff:10.0.0.1', 'localhost']) {
      expect({ address, local: isLocalAddress(address) }).toEqual({ address, local: false });
    }
  });
});

describe('addressGroup', () => {
  it('counts an IPv4 address alone, an IPv4-mapped IPv6 address as its IPv4, and an IPv6 address by its /64', () => {
    expect(addressGroup('127.0.0.1')).toBe('127.0.0.1');
    expect(addressGroup('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(addressGroup('2001:db8:0:1:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:0:1::/64');
    expect(addressGroup('2001:db8:0:1::7')).toBe('2001:db8:0:1::/64');
    expect(addressGroup('2001:DB8::1')).toBe('2001:db8:0:0::/64');
    expect(addressGroup('::1')).toBe('0:0:0:0::/64');
  });

  it('one /64 however its addresses are written; a zone id makes no group of its own', () => {
    expect(addressGroup('2001:0db8:0000:0001:0000:0000:0000:0007')).toBe(addressGroup('2001:db8:0:1::8'));
    expect(addressGroup('fe80::1%eth0')).toBe(addressGroup('fe80::1'));
    expect(addressGroup('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressGroup('::ffff:7f00:1')).toBe('127.0.0.1');
  });

  it('keeps text that is no address as its own group', () => {
    expect(addressGroup('unknown')).toBe('unknown');
  });
});

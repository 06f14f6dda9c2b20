import { accessDenial, accessPolicyOf, compileAccessPolicy, OPEN_ACCESS } from '../../../src/access/access-policy';
import { consumerAccessPolicy } from '../../../src/access/consumer-policy';

const attempt = (operationId: string | null, clientAddress: string) => ({ operationId, clientAddress });

describe('compileAccessPolicy and accessPolicyOf', () => {
  it('a record without lists has the shared open policy', () => {
    expect(compileAccessPolicy({})).toBe(OPEN_ACCESS);
    expect(accessPolicyOf({ allowedOperations: null })).toBe(OPEN_ACCESS);
  });

  it('parses a record once: the same record object gets the same compiled policy', () => {
    const record = Object.freeze({ allowedOperations: ['listPets'], allowedAddresses: ['10.0.0.0/8'] });
    const first = accessPolicyOf(record);
    expect(first).not.toBe(OPEN_ACCESS);
    expect(accessPolicyOf(record)).toBe(first);
    // A changed record is a new object: compiled anew.
    expect(accessPolicyOf({ ...record })).not.toBe(first);
  });

  it('a stored entry that does not parse is left out, which only narrows the list', () => {
    const policy = compileAccessPolicy({ allowedAddresses: ['not-an-address'] });
    expect(accessDenial(attempt('listPets', '127.0.0.1'), policy)).toBe('address');
  });
});

describe('accessDenial: one policy', () => {
  it('allows only the listed operations', () => {
    const policy = compileAccessPolicy({ allowedOperations: ['listPets'] });
    expect(accessDenial(attempt('listPets', '127.0.0.1'), policy)).toBeNull();
    expect(accessDenial(attempt('createPet', '127.0.0.1'), policy)).toBe('operation');
    expect(accessDenial(attempt('getPet', '127.0.0.1'), policy)).toBe('operation');
  });

  it('lets a request that names no listable operation through the operation list (404/405 later)', () => {
    expect(
      accessDenial(attempt(null, '127.0.0.1'), compileAccessPolicy({ allowedOperations: ['listPets'] })),
    ).toBeNull();
  });

  it('matches IPv4 addresses and ranges', () => {
    const policy = compileAccessPolicy({ allowedAddresses: ['10.0.0.0/8', '192.0.2.7'] });
    expect(accessDenial(attempt('listPets', '10.200.3.4'), policy)).toBeNull();
    expect(accessDenial(attempt('listPets', '192.0.2.7'), policy)).toBeNull();
    expect(accessDenial(attempt('listPets', '192.0.2.8'), policy)).toBe('address');
    expect(accessDenial(attempt('listPets', '127.0.0.1'), policy)).toBe('address');
    expect(accessDenial(attempt(null, '127.0.0.1'), policy)).toBe('address');
  });

  it('matches IPv6 addresses and ranges, and IPv4-mapped IPv6 clients as IPv4', () => {
    const policy = compileAccessPolicy({ allowedAddresses: ['2001:db8::/32', '::1', '10.0.0.0/8'] });
    expect(accessDenial(attempt('listPets', '2001:db8:1::5'), policy)).toBeNull();
    expect(accessDenial(attempt('listPets', '::1'), policy)).toBeNull();
    expect(accessDenial(attempt('listPets', '::ffff:10.1.1.1'), policy)).toBeNull();
    expect(accessDenial(attempt('listPets', '2001:db9::1'), policy)).toBe('address');
    expect(accessDenial(attempt('listPets', '::ffff:11.1.1.1'), policy)).toBe('address');
  });

  it('an address it cannot read is outside every list', () => {
    const policy = compileAccessPolicy({ allowedAddresses: ['0.0.0.0/0', '::/0'] });
    expect(accessDenial(attempt('listPets', 'unknown'), policy)).toBe('address');
    expect(accessDenial(attempt('listPets', '8.8.8.8'), policy)).toBeNull();
  });

  it('the open policy allows everything', () => {
    expect(accessDenial(attempt('createPet', '203.0.113.9'), OPEN_ACCESS)).toBeNull();
  });
});

describe('accessDenial: a key and its consumer', () => {
  const readOnlyKey = compileAccessPolicy({ allowedOperations: ['listPets', 'getPet'] });
  const officeConsumer = compileAccessPolicy({
    allowedAddresses: ['10.0.0.0/8'],
    allowedOperations: ['listPets', 'createPet'],
  });

  it('must satisfy both lists', () => {
    expect(accessDenial(attempt('listPets', '10.0.0.1'), readOnlyKey, officeConsumer)).toBeNull();
    // The consumer allows createPet, the key does not.
    expect(accessDenial(attempt('createPet', '10.0.0.1'), readOnlyKey, officeConsumer)).toBe('operation');
    // The key allows getPet, the consumer does not.
    expect(accessDenial(attempt('getPet', '10.0.0.1'), readOnlyKey, officeConsumer)).toBe('operation');
    // The key has no address list; the consumer's applies.
    expect(accessDenial(attempt('listPets', '127.0.0.1'), readOnlyKey, officeConsumer)).toBe('address');
  });

  it('judges the operation first, on both policies', () => {
    const key = compileAccessPolicy({ allowedAddresses: ['192.0.2.0/24'] });
    expect(accessDenial(attempt('getPet', '127.0.0.1'), key, officeConsumer)).toBe('operation');
  });

  it('a consumer without a policy, or none, leaves the key to decide', () => {
    expect(accessDenial(attempt('createPet', '127.0.0.1'), readOnlyKey, OPEN_ACCESS)).toBe('operation');
    expect(accessDenial(attempt('createPet', '127.0.0.1'), OPEN_ACCESS, null)).toBeNull();
    expect(accessDenial(attempt('createPet', '127.0.0.1'), OPEN_ACCESS, officeConsumer)).toBe('address');
  });
});

describe('consumerAccessPolicy: the seam consumers plug into', () => {
  const consumers = new Map([['con_1', Object.freeze({ allowedOperations: ['listPets'] })]]);
  const policyOf = consumerAccessPolicy((id) => consumers.get(id));

  it("finds the key's consumer and compiles its lists once", () => {
    const first = policyOf({ consumerId: 'con_1' } as never);
    expect(first).not.toBeNull();
    expect(policyOf({ consumerId: 'con_1' } as never)).toBe(first);
    expect(accessDenial(attempt('createPet', '127.0.0.1'), OPEN_ACCESS, first)).toBe('operation');
  });

  it('a key without a consumer, or with one this instance does not hold, has no consumer policy', () => {
    expect(policyOf({} as never)).toBeNull();
    expect(policyOf({ consumerId: 'con_unknown' } as never)).toBeNull();
  });
});

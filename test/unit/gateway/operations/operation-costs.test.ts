import { OperationCosts } from '../../../../src/gateway/operations/operation-costs';

describe('OperationCosts', () => {
  it("each operation costs the table's default unless config costs gives it another; HEAD costs what GET does", () => {
    const costs = new OperationCosts([{ method: 'POST', path: '/pets', cost: 4 }]);
    expect(costs.costOf('POST', '/v1/pets')).toBe(4);
    expect(costs.costOf('GET', '/v1/pets')).toBe(1);
    expect(costs.costOf('HEAD', '/v1/pets')).toBe(1);
    expect(
      new OperationCosts([{ method: 'GET', path: '/pets/{petId}', cost: 3 }]).costOf('HEAD', '/v1/pets/{petId}'),
    ).toBe(3);
  });

  it('a request that names no operation costs 1', () => {
    const costs = new OperationCosts([]);
    expect(costs.costOf('DELETE', '/v1/pets/{petId}')).toBe(1);
    expect(costs.costOf('GET', undefined)).toBe(1);
  });
});

import { deprecatedOperationId } from '../../../src/shared/public-api';

describe('deprecatedOperationId', () => {
  it('is the method and the route template with the base path, the one id of an operation', () => {
    expect(deprecatedOperationId('GET', '/v1/pets/{petId}')).toBe('GET /v1/pets/{petId}');
    expect(deprecatedOperationId('POST', '/v1/pets')).toBe('POST /v1/pets');
  });

  it('files HEAD with GET', () => {
    expect(deprecatedOperationId('HEAD', '/v1/pets/{petId}')).toBe('GET /v1/pets/{petId}');
  });
});

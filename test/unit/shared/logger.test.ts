import { Writable } from 'node:stream';
import { createLogger } from '../../../src/shared/logger';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger('info', stream), text: () => lines.join('') };
}

const key = 'asg_live_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';

describe('logger redaction', () => {
  it('blanks the Authorization header and token fields', () => {
    const { logger, text } = capture();
    logger.info({ req: { headers: { authorization: `Bearer ${key}`, cookie: 'session=1' } }, token: 'secret-token' }, 'request');
    expect(text()).not.toContain(key);
    expect(text()).not.toContain('secret-token');
    expect(text()).not.toContain('session=1');
    expect(text()).toContain('[redacted]');
  });

  it('blanks a key that turns up in any other field or in the message', () => {
    const { logger, text } = capture();
    logger.info({ note: `client sent ${key} in the query`, nested: { list: [key] } }, `saw ${key}`);
    expect(text()).not.toContain(key);
    expect(text().match(/\[redacted-key\]/g)).toHaveLength(3);
  });

  it('leaves ordinary values alone', () => {
    const { logger, text } = capture();
    logger.info({ keyId: 'key_0123456789abcdef01234567', route: '/v1/pets/{petId}' }, 'request');
    const line = JSON.parse(text());
    expect(line.keyId).toBe('key_0123456789abcdef01234567');
    expect(line.route).toBe('/v1/pets/{petId}');
  });
});

describe('logger redaction follows keys.prefix', () => {
  function captureWith(keyPrefix: string) {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    return { logger: createLogger('info', stream, { keyPrefix }), text: () => lines.join('') };
  }

  it('blanks keys of another family when keys.prefix names it, in every environment of that family', () => {
    const { logger, text } = captureWith('acme_prod_');
    const production = 'acme_prod_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';
    const staging = 'acme_stage_Zy9xWv8uTs7rQp6oNm5lKj4iHg3fEd2c';
    logger.info({ note: `pasted ${production}`, nested: { list: [staging] } }, `saw ${production}`);
    expect(text()).not.toContain(production);
    expect(text()).not.toContain(staging);
    expect(text().match(/\[redacted-key\]/g)).toHaveLength(3);
  });

  it('still blanks the product’s own asg_ keys, and leaves look-alike words of other families alone', () => {
    const { logger, text } = captureWith('acme_prod_');
    logger.info({ note: `asg_live_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z and gateway_ratelimit_rejections_total` }, 'line');
    expect(text()).toContain('[redacted-key] and gateway_ratelimit_rejections_total');
  });

  it('with the default prefix does not know other families (why the gateway passes keys.prefix)', () => {
    const { logger, text } = capture();
    logger.info({ note: 'acme_prod_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z' }, 'line');
    expect(text()).toContain('acme_prod_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z');
  });
});

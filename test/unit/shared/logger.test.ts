import { Writable } from 'node:stream';
import pino from 'pino';
import { createLogger, flatLineLogger } from '../../../src/shared/logger';

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
    logger.info(
      { req: { headers: { authorization: `Bearer ${key}`, cookie: 'session=1' } }, token: 'secret-token' },
      'request',
    );
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

describe('the flat-line logger (the request line, written without pino’s redaction walk)', () => {
  function captureFlat(keyPrefix?: string) {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    // A worker logs through a child of the process's logger: the flat logger is made from that child.
    const logger = createLogger('info', stream, keyPrefix ? { keyPrefix } : {}).child({ worker: 1 });
    return { logger: flatLineLogger(logger), text: () => lines.join('') };
  }

  it('writes an ordinary request line as it is, with the parent’s bindings', () => {
    const { logger, text } = captureFlat();
    logger.info(
      {
        requestId: 'req-1',
        route: '/v1/pets/{petId}',
        status: 200,
        keyId: 'key_0123456789abcdef01234567',
        upstreamMs: null,
      },
      'request',
    );
    const line = JSON.parse(text());
    expect(line).toMatchObject({
      worker: 1,
      requestId: 'req-1',
      route: '/v1/pets/{petId}',
      status: 200,
      keyId: 'key_0123456789abcdef01234567',
      upstreamMs: null,
      msg: 'request',
    });
  });

  it('still blanks key-shaped text in any field and in the message', () => {
    const { logger, text } = captureFlat();
    logger.info({ requestId: 'req-1', note: `sent ${key}` }, `saw ${key}`);
    expect(text()).not.toContain(key);
    expect(text().match(/\[redacted-key\]/g)).toHaveLength(2);
  });

  it('blanks fields named like a credential and any object a flat line should not have', () => {
    const { logger, text } = captureFlat();
    logger.info(
      { requestId: 'req-1', token: 'secret-token', authorization: 'Basic c2VjcmV0', nested: { token: 'deep-secret' } },
      'request',
    );
    expect(text()).not.toContain('secret-token');
    expect(text()).not.toContain('c2VjcmV0');
    expect(text()).not.toContain('deep-secret');
    expect(JSON.parse(text())).toMatchObject({
      requestId: 'req-1',
      token: '[redacted]',
      authorization: '[redacted]',
      nested: '[redacted]',
    });
  });

  it('follows keys.prefix like the logger it was made from', () => {
    const { logger, text } = captureFlat('acme_prod_');
    const staging = 'acme_stage_Zy9xWv8uTs7rQp6oNm5lKj4iHg3fEd2c';
    logger.info({ requestId: 'req-1', note: staging }, 'request');
    expect(text()).not.toContain(staging);
  });

  it('is the logger itself when it was not made by createLogger (its own redaction applies)', () => {
    const plain = pino({ level: 'info' }, new Writable({ write: (_c, _e, done) => done() }));
    expect(flatLineLogger(plain)).toBe(plain);
  });
});

describe('the time field', () => {
  it('is the ISO time of the line’s millisecond, made once per millisecond', () => {
    const { logger, text } = capture();
    const now = jest.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 10, 23, 12, 0, 0, 5));
    try {
      logger.info('first');
      logger.info('second');
      now.mockReturnValue(Date.UTC(2026, 10, 23, 12, 0, 0, 6));
      logger.info('third');
    } finally {
      now.mockRestore();
    }
    const times = text()
      .trim()
      .split('\n')
      .map((line) => (JSON.parse(line) as { time: string }).time);
    expect(times).toEqual(['2026-11-23T12:00:00.005Z', '2026-11-23T12:00:00.005Z', '2026-11-23T12:00:00.006Z']);
  });
});

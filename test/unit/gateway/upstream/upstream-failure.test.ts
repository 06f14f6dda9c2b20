import { classifyUpstreamError } from '../../../../src/gateway/upstream/upstream-failure';

function errorWithCode(code: string | undefined): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`failed with ${code}`);
  if (code !== undefined) err.code = code;
  return err;
}

describe('classifyUpstreamError', () => {
  it('the gateway’s own timeout is 504 upstream_timeout', () => {
    expect(classifyUpstreamError(errorWithCode('ASG_UPSTREAM_TIMEOUT'))).toEqual({
      code: 'upstream_timeout',
      reason: 'timeout',
      message: expect.any(String),
    });
  });

  it.each(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN'])(
    '%s is 502 upstream_unavailable, reason refused',
    (code) => {
      expect(classifyUpstreamError(errorWithCode(code))).toMatchObject({
        code: 'upstream_unavailable',
        reason: 'refused',
      });
    },
  );

  it.each(['ECONNRESET', 'EPIPE'])('%s is 502 upstream_unavailable, reason reset', (code) => {
    expect(classifyUpstreamError(errorWithCode(code))).toMatchObject({ code: 'upstream_unavailable', reason: 'reset' });
  });

  it.each([
    'HPE_INVALID_CONSTANT',
    'HPE_INVALID_STATUS',
    'HPE_INVALID_HEADER_TOKEN',
    'HPE_UNEXPECTED_CONTENT_LENGTH',
    'HPE_INVALID_VERSION',
    'HPE_SOMETHING_NEW',
  ])('%s is 502 upstream_unavailable, reason invalid_response', (code) => {
    expect(classifyUpstreamError(errorWithCode(code))).toMatchObject({
      code: 'upstream_unavailable',
      reason: 'invalid_response',
    });
  });

  it.each([['EWHATEVER'], [undefined]])('anything else (%s) is 502 upstream_unavailable, reason other', (code) => {
    expect(classifyUpstreamError(errorWithCode(code))).toMatchObject({ code: 'upstream_unavailable', reason: 'other' });
  });

  it('never puts the underlying error text in the client message', () => {
    const failure = classifyUpstreamError(
      Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:8090'), { code: 'ECONNREFUSED' }),
    );
    expect(failure.message).not.toMatch(/10\.1\.2\.3|8090|ECONNREFUSED/);
  });
});

describe('classifyUpstreamError with undici’s codes (the undici forwarder)', () => {
  it.each(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])(
    '%s is 504 upstream_timeout, reason timeout',
    (code) => {
      expect(classifyUpstreamError(errorWithCode(code))).toMatchObject({ code: 'upstream_timeout', reason: 'timeout' });
    },
  );

  it.each(['UND_ERR_SOCKET', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'])(
    '%s is 502 upstream_unavailable, reason reset',
    (code) => {
      expect(classifyUpstreamError(errorWithCode(code))).toMatchObject({
        code: 'upstream_unavailable',
        reason: 'reset',
      });
    },
  );

  it('an HTTPParserError without a code is 502 upstream_unavailable, reason invalid_response', () => {
    const err = Object.assign(errorWithCode(undefined), { name: 'HTTPParserError' });
    expect(classifyUpstreamError(err)).toMatchObject({ code: 'upstream_unavailable', reason: 'invalid_response' });
  });
});

import { redactedUrl } from '../../../src/shared/redaction';

/** Issue 48 (item 12): a receiver's token in its URL's path or query is never shown. */
describe('redactedUrl', () => {
  it.each([
    ['https://hooks.example/T0KEN/x?token=abc', 'https://hooks.example/[redacted]?token=[redacted]'],
    ['https://hooks.slack.example/services/T000/B000/XXXXSECRET', 'https://hooks.slack.example/[redacted]'],
    [
      'https://user:pw@hooks.example:8443/h?a=1&b=&c',
      'https://user:[redacted]@hooks.example:8443/[redacted]?a=[redacted]&b=[redacted]&[redacted]',
    ],
    ['https://:pw@hooks.example/', 'https://:[redacted]@hooks.example/'],
    ['http://[::1]:9000/?sig=abc#frag', 'http://[::1]:9000/?sig=[redacted]#[redacted]'],
    ['https://hooks.example', 'https://hooks.example/'],
    ['https://hooks.example/', 'https://hooks.example/'],
  ])('%s is shown as %s', (url, shown) => {
    expect(redactedUrl(url)).toBe(shown);
  });

  it('shows nothing of text that is no URL', () => {
    expect(redactedUrl('hooks.example/T0KEN')).toBe('[redacted]');
  });
});

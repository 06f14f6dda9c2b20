import { decodeCursor } from '../../../src/inventory/pagination-cursor';
import { nextPageLink, publicOrigin } from '../../../src/inventory/next-page-link';

describe('publicOrigin', () => {
  it('uses http and Host without forwarding headers', () => {
    expect(publicOrigin({ host: '127.0.0.1:8090' })).toBe('http://127.0.0.1:8090');
  });

  it('prefers X-Forwarded-Proto and X-Forwarded-Host (first value of a list)', () => {
    expect(
      publicOrigin({
        host: 'inventory:8090',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'api.animalstore.example, proxy',
      }),
    ).toBe('https://api.animalstore.example');
  });

  it('falls back to Host when X-Forwarded-Host is not a host name, and to http for an odd proto', () => {
    expect(
      publicOrigin({ host: 'inventory:8090', 'x-forwarded-proto': 'gopher', 'x-forwarded-host': 'evil.example/path?' }),
    ).toBe('http://inventory:8090');
  });

  it('accepts a bracketed IPv6 host', () => {
    expect(publicOrigin({ host: '[::1]:8090' })).toBe('http://[::1]:8090');
  });
});

describe('nextPageLink', () => {
  it('keeps limit and status and adds a cursor after the last id', () => {
    const link = nextPageLink('https://api.animalstore.example', { limit: 5, status: 'pending', afterId: 0 }, 17);
    const match = /^<(.+)>; rel="next"$/.exec(link);
    expect(match).not.toBeNull();
    const url = new URL(match![1]!);
    expect(url.origin + url.pathname).toBe('https://api.animalstore.example/v1/pets');
    expect(url.searchParams.get('limit')).toBe('5');
    expect(url.searchParams.get('status')).toBe('pending');
    expect(decodeCursor(url.searchParams.get('cursor')!)).toBe(17);
  });

  it('has no status when the walk is unfiltered', () => {
    expect(nextPageLink('http://h', { limit: 20, afterId: 3 }, 23)).not.toContain('status=');
  });
});

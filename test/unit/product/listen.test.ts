import { listenOptions } from '../../../src/product/listen';

describe('listenOptions', () => {
  it('gives a cluster worker its own socket on the port, shared with the other workers through SO_REUSEPORT', () => {
    expect(listenOptions(8080, '127.0.0.1', true)).toEqual({
      port: 8080,
      host: '127.0.0.1',
      backlog: 4096,
      exclusive: true,
      reusePort: true,
    });
  });

  it('leaves port 0 to the cluster, which gives every worker the same port', () => {
    expect(listenOptions(0, '127.0.0.1', true)).toEqual({ port: 0, host: '127.0.0.1', backlog: 4096 });
  });

  it('listens plainly in a single process', () => {
    expect(listenOptions(8080, '0.0.0.0', false)).toEqual({ port: 8080, host: '0.0.0.0', backlog: 4096 });
  });
});

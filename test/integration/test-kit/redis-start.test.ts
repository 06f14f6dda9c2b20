import net from 'node:net';
import { freePort, RedisPortTakenError, startRedisServer } from '../../support/redis-server';
import { PersistentRedis } from '../leases/persistent-redis';

// The kit's redis-server start: ready means this process listens, and a server that cannot start
// says why at once. A CI run lost a minute-long hook to a node that had exited at start while the
// kit went on waiting for a PING.

/** A listener that answers every line with +PONG, as another worker's Redis on the same port would. */
async function pongServer(port: number): Promise<net.Server> {
  const server = net.createServer((socket) => socket.on('data', () => socket.write('+PONG\r\n')));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

describe('startRedisServer', () => {
  it('on a port another process holds (and answers PING on): fails with RedisPortTakenError and the server log, not a server that is not ours', async () => {
    const port = await freePort();
    const other = await pongServer(port);
    try {
      const start = startRedisServer([], port);
      await expect(start).rejects.toBeInstanceOf(RedisPortTakenError);
      await expect(start).rejects.toThrow(/exited at start[\s\S]*Address already in use/);
    } finally {
      other.close();
    }
  });

  it('a server that exits at start for another reason: fails with its log line, not the port error', async () => {
    const start = startRedisServer(['--no-such-directive', 'yes']);
    await expect(start).rejects.toThrow(/exited at start[\s\S]*no-such-directive/);
    await expect(start).rejects.not.toBeInstanceOf(RedisPortTakenError);
  });

  it('a free port: answers PING as the process it started', async () => {
    const redis = await startRedisServer();
    try {
      const reply = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(redis.port, '127.0.0.1', () => socket.write('INFO server\r\n'));
        let text = '';
        socket.on('data', (chunk) => {
          text += chunk.toString();
          if (text.includes('process_id:')) {
            socket.destroy();
            resolve(text);
          }
        });
        socket.once('error', reject);
      });
      expect(reply).toContain(`process_id:${redis.pid}\r\n`);
    } finally {
      await redis.stop();
    }
  });
});

describe('PersistentRedis (the leases harness store)', () => {
  it('on a port another process holds: fails with RedisPortTakenError, not a store that is not ours', async () => {
    const port = await freePort();
    const other = await pongServer(port);
    try {
      await expect(PersistentRedis.start([], port)).rejects.toBeInstanceOf(RedisPortTakenError);
    } finally {
      other.close();
    }
  });
});

import { defineLuaScript } from '../../../../src/shared/redis/lua-script';
import { connectRedis, type RedisClient } from '../../../../src/shared/redis/redis';
import { useRedisPerFile } from '../../../support/redis-per-file';
import { uniqueNamespace } from '../../../support/test-redis';

// A Redis of this file's own: the test flushes the script cache, which other suites should not see.
const redis = useRedisPerFile();
let client: RedisClient;

beforeAll(async () => {
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
});

afterAll(async () => {
  await client.quit();
});

const INCREMENT = defineLuaScript<number>('asgTestIncrement', "return redis.call('INCRBY', KEYS[1], ARGV[1])", 1);
const COUNT_KEYS = defineLuaScript<[number, string]>('asgTestCountKeys', 'return {#KEYS, ARGV[1]}');

test('a script runs with its keys and arguments and answers its reply', async () => {
  const key = uniqueNamespace('lua') + ':n';
  const increment = INCREMENT.on(client);
  await expect(increment([key], [2])).resolves.toBe(2);
  await expect(increment([key], ['3'])).resolves.toBe(5);
});

test('a script without a fixed number of keys takes as many as each call gives', async () => {
  const ns = uniqueNamespace('lua');
  const countKeys = COUNT_KEYS.on(client);
  await expect(countKeys([`${ns}:a`, `${ns}:b`, `${ns}:c`], ['x'])).resolves.toEqual([3, 'x']);
  await expect(countKeys([], ['y'])).resolves.toEqual([0, 'y']);
});

test('a server that forgot the script (SCRIPT FLUSH, as after a restart) is sent it again', async () => {
  const key = uniqueNamespace('lua') + ':n';
  const increment = INCREMENT.on(client);
  await increment([key], [1]);
  await client.script('FLUSH');
  await expect(increment([key], [1])).resolves.toBe(2);
});

test('a call with another number of keys than the script declares is refused before Redis is asked', async () => {
  const key = uniqueNamespace('lua') + ':n';
  const increment = INCREMENT.on(client);
  await expect(increment([key, key + ':other'], [1])).rejects.toThrow(
    'Lua script asgTestIncrement takes 1 keys, was given 2',
  );
  expect(await client.exists(key)).toBe(0);
});

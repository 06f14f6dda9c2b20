import { ipcRequests, type IpcListen } from '../../../src/workers/ipc-request';

interface Answer {
  type: 'asg:answer';
  id: number;
  value: string;
}

/** The other side, in memory: what was sent, and a way to deliver any message back. */
function channel() {
  let listener: (message: unknown) => void = () => {};
  const listen: IpcListen = (l) => (listener = l);
  return { listen, deliver: (message: unknown) => listener(message) };
}

afterEach(() => jest.useRealTimers());

test('each request gets its own id and the answer carrying that id, whatever the order of answers', async () => {
  const other = channel();
  const requests = ipcRequests<Answer>({
    answerType: 'asg:answer',
    listen: other.listen,
    timeoutMs: 1000,
    timeoutMessage: 'no answer',
  });
  const sent: number[] = [];
  const first = requests.ask((id) => sent.push(id));
  const second = requests.ask((id) => sent.push(id));
  expect(sent).toEqual([0, 1]);
  other.deliver({ type: 'asg:answer', id: 1, value: 'b' });
  other.deliver({ type: 'asg:answer', id: 0, value: 'a' });
  await expect(first).resolves.toEqual({ type: 'asg:answer', id: 0, value: 'a' });
  await expect(second).resolves.toEqual({ type: 'asg:answer', id: 1, value: 'b' });
});

test('other messages on the channel, and answers to no pending request, pass by', async () => {
  const other = channel();
  const requests = ipcRequests<Answer>({
    answerType: 'asg:answer',
    listen: other.listen,
    timeoutMs: 1000,
    timeoutMessage: 'no answer',
  });
  const asked = requests.ask(() => {});
  for (const message of [
    null,
    'text',
    { type: 'prom-client:getMetricsReq', id: 0 },
    { type: 'asg:answer', id: 7, value: 'x' },
    { type: 'asg:answer', value: 'no id' },
  ]) {
    other.deliver(message);
  }
  other.deliver({ type: 'asg:answer', id: 0, value: 'mine' });
  await expect(asked).resolves.toMatchObject({ value: 'mine' });
});

test('a request nobody answers rejects after the timeout, and its late answer is dropped', async () => {
  jest.useFakeTimers();
  const other = channel();
  const requests = ipcRequests<Answer>({
    answerType: 'asg:answer',
    listen: other.listen,
    timeoutMs: 5000,
    timeoutMessage: 'the supervisor did not answer',
  });
  const asked = requests.ask(() => {});
  jest.advanceTimersByTime(4999);
  other.deliver({ type: 'asg:other', id: 0 });
  jest.advanceTimersByTime(1);
  await expect(asked).rejects.toThrow('the supervisor did not answer');
  expect(() => other.deliver({ type: 'asg:answer', id: 0, value: 'late' })).not.toThrow();
});

test('a send that throws (the channel is closed) rejects the request at once', async () => {
  const other = channel();
  const requests = ipcRequests<Answer>({
    answerType: 'asg:answer',
    listen: other.listen,
    timeoutMs: 60_000,
    timeoutMessage: 'no answer',
  });
  await expect(
    requests.ask(() => {
      throw new Error('channel closed');
    }),
  ).rejects.toThrow('channel closed');
});

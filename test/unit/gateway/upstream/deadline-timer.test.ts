import { DeadlineTimer, type Deadlined } from '../../../../src/gateway/upstream/deadline-timer';

const MS = 1_000_000n;

describe('DeadlineTimer', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  function setUp() {
    const timer = new DeadlineTimer<Deadlined & { name: string }>();
    const passed: string[] = [];
    const item = (name: string, inMs: number) => {
      const held = {
        name,
        deadlineAt: process.hrtime.bigint() + BigInt(inMs) * MS,
        deadlinePassed: () => {
          passed.push(name);
          timer.delete(held);
        },
      };
      timer.add(held);
      return held;
    };
    return { timer, passed, item };
  }

  it('answers each held item at its own deadline, with one timer for all of them', () => {
    const { timer, passed, item } = setUp();
    item('a', 1000);
    jest.advanceTimersByTime(300);
    item('b', 1000);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(699);
    expect(passed).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(passed).toEqual(['a']);
    jest.advanceTimersByTime(299);
    expect(passed).toEqual(['a']);
    jest.advanceTimersByTime(1);
    expect(passed).toEqual(['a', 'b']);
    expect(timer.size).toBe(0);
  });

  it('an item added with an earlier deadline than the one armed is answered at its own', () => {
    const { passed, item } = setUp();
    item('late', 1000);
    // Arrived earlier (its deadline counts from its arrival), handed over later.
    item('early', 400);
    jest.advanceTimersByTime(400);
    expect(passed).toEqual(['early']);
    jest.advanceTimersByTime(600);
    expect(passed).toEqual(['early', 'late']);
  });

  it('an item deleted before its deadline is never answered', () => {
    const { timer, passed, item } = setUp();
    const answered = item('answered', 1000);
    item('hung', 2000);
    timer.delete(answered);
    jest.advanceTimersByTime(1000);
    expect(passed).toEqual([]);
    jest.advanceTimersByTime(1000);
    expect(passed).toEqual(['hung']);
  });
});

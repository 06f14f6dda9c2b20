import { CommandDeadline, DEADLINE_MARGIN_MS } from '../../../../src/limits/redis/command-deadline';

/** Deadlines in Redis time from the replies' `now` (src/limits/redis/command-deadline.ts), on a hand-driven local clock. */
const TIMEOUT_MS = 300;

function deadlineAt(argument: string): number {
  expect(argument.startsWith('<')).toBe(true);
  return Number(argument.slice(1));
}

test('no deadline before any reply: Redis TIME alone', () => {
  const local = 1_000_000;
  const deadline = new CommandDeadline(TIMEOUT_MS);
  expect(deadline.argument(local)).toBe('');
});

test('Redis 2 s ahead: the deadline is the timeout, plus the offset, plus the margin', () => {
  let local = 1_000_000;
  const deadline = new CommandDeadline(TIMEOUT_MS);
  deadline.observe(local, local + 2_000 + 1); // run 1 ms after it was sent
  local += 10;
  expect(deadlineAt(deadline.argument(local))).toBe(local + TIMEOUT_MS + 2_001 + DEADLINE_MARGIN_MS);
});

test('a reply delayed in a queue does not loosen deadlines: the smallest bound of the last two periods counts', () => {
  let local = 1_000_000;
  const deadline = new CommandDeadline(TIMEOUT_MS);
  deadline.observe(local, local + 5);
  deadline.observe(local, local + 250); // waited 245 ms more somewhere
  deadline.observe(local, local + 3);
  expect(deadlineAt(deadline.argument(local))).toBe(local + TIMEOUT_MS + 3 + DEADLINE_MARGIN_MS);
  // Two periods (5 s each) later with slower replies only, the 3 is forgotten.
  for (let i = 0; i < 3; i++) {
    local += 5_000;
    deadline.observe(local, local + 8);
  }
  expect(deadlineAt(deadline.argument(local))).toBe(local + TIMEOUT_MS + 8 + DEADLINE_MARGIN_MS);
});

test('a local clock stepped back 10 s: one late refusal a client waited for sets the floor, and the next deadline is right', () => {
  let local = 1_000_000;
  const deadline = new CommandDeadline(TIMEOUT_MS);
  deadline.observe(local, local + 5);
  local -= 10_000; // Redis is now 10 s ahead of this clock
  const sentAt = local;
  // This command's deadline is too early by Redis's clock: refused late, with Redis's now.
  expect(deadlineAt(deadline.argument(sentAt))).toBeLessThan(sentAt + 10_005);
  deadline.observeLate(sentAt, sentAt + 10_006);
  expect(deadlineAt(deadline.argument(local))).toBe(local + TIMEOUT_MS + 10_006 + DEADLINE_MARGIN_MS);
  // Fresh replies, each a bound of the new offset, keep it there; the old 5 ms ages out.
  deadline.observe(local, local + 10_004);
  expect(deadlineAt(deadline.argument(local))).toBe(local + TIMEOUT_MS + 10_006 + DEADLINE_MARGIN_MS);
});

test('a local clock stepped forward 10 s: the next reply tightens deadlines at once', () => {
  let local = 1_000_000;
  const deadline = new CommandDeadline(TIMEOUT_MS);
  deadline.observe(local, local + 5);
  local += 10_000; // this clock is now 10 s ahead of Redis (also ends both periods)
  deadline.observe(local, local - 9_995);
  expect(deadlineAt(deadline.argument(local))).toBe(local + TIMEOUT_MS - 9_995 + DEADLINE_MARGIN_MS);
});

test('forgets every bound after two idle periods: the next command goes without a deadline', () => {
  let local = 1_000_000;
  const deadline = new CommandDeadline(TIMEOUT_MS);
  deadline.observe(local, local + 5);
  local += 10_001;
  expect(deadline.argument(local)).toBe('');
});

test("reads Redis's now from a late refusal, and nothing from any other error", () => {
  expect(CommandDeadline.lateAt(new Error('LATE 1764331200123'))).toBe(1764331200123);
  expect(CommandDeadline.lateAt(new Error('Command timed out'))).toBeNull();
  expect(CommandDeadline.lateAt('LATE 1')).toBeNull();
});

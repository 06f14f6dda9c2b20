import { AdmissionLog } from '../../../../src/limits/windows/admission-log';

const MINUTE = 60_000;

describe('AdmissionLog', () => {
  it('counts and finds the oldest admission of the interval (now - 60 s, now] without changing the log', () => {
    const log = new AdmissionLog();
    for (const at of [1_000, 2_000, 30_000]) log.push(at);
    expect(log.countAt(30_000)).toBe(3);
    expect(log.oldestAt(30_000)).toBe(1_000);
    // At 61 s the admission of 1 s has left (it is exactly 60 s old); the one of 2 s has not.
    expect(log.countAt(1_000 + MINUTE)).toBe(2);
    expect(log.oldestAt(1_000 + MINUTE)).toBe(2_000);
    expect(log.countAt(30_000 + MINUTE)).toBe(0);
    expect(log.oldestAt(30_000 + MINUTE)).toBe(0);
    // Reading changed nothing.
    expect(log.countAt(30_000)).toBe(3);
  });

  it('prunes to the interval and stays right across compactions of a large log', () => {
    const log = new AdmissionLog();
    // 10 admissions a millisecond-step apart for 3 minutes: far past the compaction threshold.
    let now = 0;
    for (let i = 0; i < 180_000; i++) {
      now = i;
      log.prune(now);
      log.push(now);
      if (i % 9_973 === 0) expect(log.countAt(now)).toBe(Math.min(i + 1, MINUTE));
    }
    expect(log.prune(now)).toBe(MINUTE);
    expect(log.oldestAt(now)).toBe(now - MINUTE + 1);
  });

  it('starts from a snapshot: all its admissions at one instant', () => {
    const log = new AdmissionLog();
    log.push(5);
    log.fill(3, 10_000);
    expect(log.countAt(10_000)).toBe(3);
    expect(log.oldestAt(10_000)).toBe(10_000);
    expect(log.prune(10_000 + MINUTE)).toBe(0);
  });
});

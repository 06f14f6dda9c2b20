import { LineSplitter, LineTooLongError } from '../../../src/shared/line-splitter';

/** Every line a splitter makes of these chunks, its last (unterminated) one included. */
function split(chunks: Buffer[], maxLineBytes: number): string[] {
  const splitter = new LineSplitter(maxLineBytes);
  const lines = chunks.flatMap((chunk) => splitter.push(chunk));
  return [...lines, ...splitter.end()];
}

describe('LineSplitter: bytes into lines in one pass, no line over its cap', () => {
  it('splits at each newline, joins a line and a character cut across chunks, keeps empty lines and a last line without newline', () => {
    const euro = Buffer.from('€');
    const chunks = [
      Buffer.from('ab'),
      Buffer.concat([Buffer.from('c\nd'), euro.subarray(0, 1)]),
      euro.subarray(1),
      Buffer.from('\n\n'),
      Buffer.from('last'),
    ];
    expect(split(chunks, 100)).toEqual(['abc', 'd€', '', 'last']);
    expect(split([Buffer.from('one\n')], 100)).toEqual(['one']);
    expect(split([], 100)).toEqual([]);
  });

  it('takes a line of exactly the cap and refuses one byte more, naming the line, before the rest of it is read', () => {
    expect(split([Buffer.from('ok\n'), Buffer.alloc(8, 'x'), Buffer.from('\n')], 8)).toEqual(['ok', 'xxxxxxxx']);
    const splitter = new LineSplitter(8);
    expect(splitter.push(Buffer.from('ok\nxxxx'))).toEqual(['ok']);
    let refused: unknown;
    try {
      splitter.push(Buffer.from('xxxxx'));
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(LineTooLongError);
    expect(refused).toMatchObject({ line: 2, maxBytes: 8, message: 'line 2 is longer than 8 bytes' });
  });

  it('splits a 4 MB line arriving 16 bytes at a time (262,144 chunks) in one pass', () => {
    // Joined to each chunk and split again, this line's bytes would be looked at some 5 x 10^11 times.
    const splitter = new LineSplitter(8 * 1024 * 1024);
    const chunk = Buffer.from('abcdefghijklmnop');
    let early = 0;
    for (let i = 0; i < 262_144; i++) early += splitter.push(chunk).length;
    const [line] = splitter.push(Buffer.from('\n'));
    expect(early).toBe(0);
    expect(line).toHaveLength(4 * 1024 * 1024);
    expect(line!.slice(0, 20)).toBe('abcdefghijklmnopabcd');
  });
});

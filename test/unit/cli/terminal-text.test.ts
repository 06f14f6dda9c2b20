import { escapeControls, escapeStrings, terminalSafeJson } from '../../../src/cli/terminal-text';

/** Issue 42: nothing the admin API holds reaches the operator's terminal as a control character. */
describe('terminal text', () => {
  it('escapes C0, DEL, C1 and bidirectional controls, and keeps everything else', () => {
    expect(escapeControls('a\u001b[2Jb\u009bc\u007fd\u202ee\n\t\rf é ü 日本 🐶')).toBe(
      'a\\u001b[2Jb\\u009bc\\u007fd\\u202ee\\n\\t\\rf é ü 日本 🐶',
    );
    expect(escapeStrings({ name: 'x\u001b', list: ['\u0007'], n: 3, nil: null })).toEqual({
      name: 'x\\u001b',
      list: ['\\u0007'],
      n: 3,
      nil: null,
    });
  });

  it('makes JSON text safe without changing what it parses to', () => {
    const value = { name: 'a\u009b31m\u202e\u2028b\u001b' };
    const text = terminalSafeJson(JSON.stringify(value, null, 2));
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u202e]/);
    expect(JSON.parse(text)).toEqual(value);
    const ndjson = `${JSON.stringify(value)}\n${JSON.stringify({ b: '\u0085' })}`;
    expect(
      terminalSafeJson(ndjson)
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([value, { b: '\u0085' }]);
  });
});

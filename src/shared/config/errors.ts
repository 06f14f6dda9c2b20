/** Bad settings, every one of them: each problem is the one line an operator sees for it. */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string | readonly string[]) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(list.join('\n'));
    this.name = 'ConfigError';
    this.problems = list;
  }
}

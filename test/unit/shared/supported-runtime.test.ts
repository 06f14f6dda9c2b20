import { OLDEST_SUPPORTED_MAJOR, nodeVersion, unsupportedRuntimeMessage } from '../../../src/shared/supported-runtime';

describe('supported runtime', () => {
  it.each(['v20.20.2', 'v22.21.0', 'v23.11.1'])(
    'refuses %s with one line that names the version and what to run instead',
    (version) => {
      const message = unsupportedRuntimeMessage(version);
      expect(message).toContain(`Node ${version} is not supported`);
      expect(message).toContain('npm start');
      expect(message).not.toContain('\n');
    },
  );

  it.each(['v24.11.0', 'v24.21.0', 'v26.10.0', 'v27.0.0'])('accepts %s', (version) => {
    expect(unsupportedRuntimeMessage(version)).toBeNull();
  });

  it('the suite itself runs on a supported Node (the one npm ci brings, or Node 26 in the second CI run)', () => {
    expect(Number(nodeVersion.slice(1).split('.')[0])).toBeGreaterThanOrEqual(OLDEST_SUPPORTED_MAJOR);
  });
});

import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { isObject, type JsonObject } from './merge';

const readFailures: Record<string, string> = {
  ENOENT: 'does not exist',
  EACCES: 'cannot be read (permission denied)',
  EISDIR: 'is a directory',
};

/**
 * The largest config file read (CONTRACT §5). Settings fit in a few kilobytes; a file of megabytes
 * is a mistake or an attack, and parsing YAML costs about a second per megabyte here (a 12 MB
 * reload froze the public listener 11 s, issue 42): it is refused before it is read.
 */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/**
 * A config file's settings, or null after adding the reason it cannot be used to `problems`.
 * `label` names the file in the line: `CONFIG_FILE` for the operator's own, `config file` for ours.
 */
export function readConfigFile(file: string, label: string, problems: string[]): JsonObject | null {
  let text: string;
  try {
    const { size } = fs.statSync(file);
    if (size > MAX_CONFIG_FILE_BYTES) {
      problems.push(
        `${label} ${file} is ${size} bytes: a config file is at most 1 MiB (${MAX_CONFIG_FILE_BYTES} bytes)`,
      );
      return null;
    }
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    problems.push(`${label} ${file} ${readFailures[code] ?? `cannot be read (${code})`}`);
    return null;
  }
  let parsed: unknown;
  try {
    parsed = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    problems.push(
      `${label} ${file} is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
    );
    return null;
  }
  if (parsed === null || parsed === undefined) return {};
  if (!isObject(parsed)) {
    problems.push(`${label} ${file} must hold a mapping of settings at the top level`);
    return null;
  }
  return parsed;
}

/** `config/<name>.yaml`, `.yml` or `.json`, whichever exists; none is fine except for `default`. */
export function findConfigFile(dir: string, name: string): string | null {
  for (const ext of ['.yaml', '.yml', '.json']) {
    const candidate = path.join(dir, name + ext);
    if (fs.existsSync(candidate)) return candidate;
  }
  return null;
}

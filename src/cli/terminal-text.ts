/**
 * What reaches the operator's terminal from the admin API (key names, audit details, error
 * messages) can hold any character: an imported record, or a name given to the API. A terminal
 * acts on control characters (ESC starts a sequence that can clear the screen, retitle the window
 * or rewrite what was printed; C1 0x9B is a CSI of its own) and on bidirectional overrides (they
 * reorder what is shown). Each is printed as an escape instead, so the operator sees it.
 */
const TERMINAL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** What JSON.stringify leaves as it is and a terminal does not: C0 controls are escaped by JSON itself. */
const RAW_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const SHORT_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const unicodeEscape = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** `text` with every control character as `\n`, `\r`, `\t` or `\u001b`: one line, printed as it is. */
export function escapeControls(text: string): string {
  return text.replace(TERMINAL_CONTROLS, (char) => SHORT_ESCAPES[char] ?? unicodeEscape(char));
}

/** A copy of `value` with every string in it escaped (for the human layouts of src/cli/format.ts). */
export function escapeStrings<T>(value: T): T {
  if (typeof value === 'string') return escapeControls(value) as T;
  if (Array.isArray(value)) return value.map(escapeStrings) as T;
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [escapeControls(key), escapeStrings(inner)]),
  ) as T;
}

/**
 * JSON (or NDJSON) text with the characters JSON leaves raw written as `\uXXXX`: the same value to
 * any JSON parser, and nothing a terminal acts on. They can only stand inside strings, so the
 * document's own layout is untouched.
 */
export function terminalSafeJson(text: string): string {
  return text.replace(RAW_IN_JSON, unicodeEscape);
}

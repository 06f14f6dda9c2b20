export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Objects merge key by key; arrays and scalars are replaced whole (CONTRACT §2). */
export function mergeConfig(base: JsonObject, override: JsonObject): JsonObject {
  const merged: JsonObject = { ...base };
  for (const [key, value] of Object.entries(override)) {
    const current = merged[key];
    merged[key] = isObject(current) && isObject(value) ? mergeConfig(current, value) : value;
  }
  return merged;
}

/** Sets a nested setting, making the objects on its way. */
export function setPath(target: JsonObject, keys: string[], value: Json): void {
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    node = isObject(next) ? next : (node[key] = {});
  }
  node[keys[keys.length - 1]!] = value;
}

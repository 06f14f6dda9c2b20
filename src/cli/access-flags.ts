/**
 * The CLI's access policy flags (CONTRACT §4): `--operations listPets,getPet` and
 * `--addresses 10.0.0.0/8,2001:db8::/32` set a list (comma or space separated); on update,
 * `--clear-operations` / `--clear-addresses` remove one. The admin API checks the entries and
 * names each bad one in its 400, which the CLI prints.
 */
export const accessOptions = { operations: { type: 'string' as const }, addresses: { type: 'string' as const } };
export const clearAccessOptions = {
  'clear-operations': { type: 'boolean' as const },
  'clear-addresses': { type: 'boolean' as const },
};

export const ACCESS_USAGE = '[--operations ID,ID] [--addresses CIDR,CIDR]';
export const CLEAR_ACCESS_USAGE =
  '[--operations ID,ID | --clear-operations] [--addresses CIDR,CIDR | --clear-addresses]';

type Values = Record<string, string | boolean | undefined>;

/** The flag's entries; an empty flag is sent as an empty list, which the admin API refuses saying to clear instead. */
function entriesOf(value: string): string[] {
  return value.split(/[\s,]+/).filter((entry) => entry.length > 0);
}

/** The access lists a create or update sends; `conflict` reports a set-and-clear of one list. */
export function accessListsFrom(
  values: Values,
  conflict: (message: string) => Error,
): { allowedOperations?: string[] | null; allowedAddresses?: string[] | null } {
  const lists: { allowedOperations?: string[] | null; allowedAddresses?: string[] | null } = {};
  const fields = [
    ['operations', 'clear-operations', 'allowedOperations'],
    ['addresses', 'clear-addresses', 'allowedAddresses'],
  ] as const;
  for (const [flag, clear, field] of fields) {
    const value = values[flag];
    if (typeof value === 'string' && values[clear]) throw conflict(`--${clear} cannot go with --${flag}`);
    if (typeof value === 'string') lists[field] = entriesOf(value);
    if (values[clear]) lists[field] = null;
  }
  return lists;
}

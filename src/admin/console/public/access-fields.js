// @ts-check
// A key's access policy on its page (CONTRACT §4): shown among its facts, and two fields of the
// change form. A list is typed comma or space separated; an empty field means no list. A save sends
// a list only when the operator changed it, so saving a new name never touches the policy.

import { byId } from './dom.js';

/** @typedef {import('./types.js').KeyDetail} KeyDetail */
/** @typedef {import('./types.js').KeyChange} KeyChange */

const fields = {
  operations: byId('edit-operations', HTMLInputElement),
  addresses: byId('edit-addresses', HTMLInputElement),
};

/** The fields as the form was filled, to tell what the operator changed. */
let asFilled = { operations: '', addresses: '' };

/** A list for the facts: its entries, or what having none means. */
export function accessFacts(/** @type {KeyDetail} */ key) {
  /** @type {Array<[string, string]>} */
  const facts = [
    ['Allowed operations', key.allowedOperations ? `${key.allowedOperations.join(', ')} (and usage)` : 'all'],
    ['Allowed addresses', key.allowedAddresses ? key.allowedAddresses.join(', ') : 'any'],
  ];
  return facts;
}

export function fillAccessFields(/** @type {KeyDetail} */ key) {
  fields.operations.value = (key.allowedOperations ?? []).join(', ');
  fields.addresses.value = (key.allowedAddresses ?? []).join(', ');
  asFilled = { operations: fields.operations.value, addresses: fields.addresses.value };
}

/** The field's list, or null for an empty field (no list). */
function listOf(/** @type {HTMLInputElement} */ input) {
  const entries = input.value.split(/[\s,]+/).filter((entry) => entry.length > 0);
  return entries.length > 0 ? entries : null;
}

/** Adds to the change the lists the operator changed; the admin API's 400 names a bad entry. */
export function withAccessChanges(/** @type {KeyChange} */ body) {
  if (fields.operations.value !== asFilled.operations) body.allowedOperations = listOf(fields.operations);
  if (fields.addresses.value !== asFilled.addresses) body.allowedAddresses = listOf(fields.addresses);
  return body;
}

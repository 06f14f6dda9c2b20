// @ts-check
// The page's elements, looked up by id with their kind checked, and the two builders every view
// uses. Values reach the page through textContent and attributes only, never as HTML.

/**
 * The element with this id, of this kind. A missing id or another kind of element throws, naming
 * the id: the views look their elements up when they load, so a renamed id stops the page at once.
 * @template {Element} T
 * @param {string} id
 * @param {{ new (): T, prototype: T, name: string }} kind
 * @returns {T}
 */
export function byId(id, kind) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`console: the page has no element #${id}`);
  if (!(node instanceof kind))
    throw new Error(`console: #${id} is a <${node.tagName.toLowerCase()}>, not a ${kind.name}`);
  return node;
}

/** @typedef {Record<string, string | number | boolean | null | undefined>} Attributes */

/**
 * An HTML element; `text` sets its text, `false`/null/undefined leave an attribute out.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attributes} [attrs]
 * @param {...(Node | string)} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = String(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  node.append(...children);
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * An SVG element with these attributes.
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, string | number>} [attrs]
 * @returns {SVGElementTagNameMap[K]}
 */
export function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

const statusLine = byId('status', HTMLElement);

/** The page's status line (a polite live region): what just happened, or why nothing did. */
export function say(/** @type {string} */ message) {
  statusLine.textContent = message;
}

// @ts-check
// Stacked bar charts drawn as SVG by the page itself (all the console needs; a charting package
// would be more code to ship than this).

import { el, svg } from './dom.js';
import { fmtNumber, fmtRate, niceScale } from './format.js';

/** The chart colours; the legend's swatch classes (swatch-0 …) in console.css follow this order. */
export const PALETTE = /** @type {const} */ ([
  '#1a7f37',
  '#0a58ca',
  '#bf8700',
  '#b42318',
  '#8250df',
  '#57606a',
  '#0e7490',
]);
const COLOURS = /** @type {readonly string[]} */ (PALETTE);

/**
 * @template P
 * @typedef {{
 *   valueOf: (point: P, series: string) => number,
 *   labelOf: (point: P) => string,
 *   unit: string,
 *   colours: string[],
 *   empty: string,
 *   integers?: boolean,
 * }} ChartOptions
 */

/** Each drawn chart's redraw, so a change of the box's size (resize, zoom) draws it again. */
const redraws = new Map();
const resizeWatcher = new ResizeObserver((entries) => {
  for (const entry of entries) {
    if (entry.contentRect.width > 0) redraws.get(entry.target)?.();
  }
});

const MARGIN = { left: 48, right: 8, bottom: 24, top: 10 };

/**
 * One bar per point, one colour per series (in `series` order), at the box's own pixel size (so
 * text is never stretched) in a box of fixed height, so drawing never moves the page.
 * @template P
 * @param {HTMLElement} container
 * @param {HTMLElement} legend
 * @param {P[]} points
 * @param {string[]} series
 * @param {ChartOptions<P>} options
 */
export function drawStackedBars(container, legend, points, series, options) {
  if (!redraws.has(container)) resizeWatcher.observe(container);
  redraws.set(container, () => drawStackedBars(container, legend, points, series, options));
  const { valueOf, labelOf, unit, colours, empty, integers = false } = options;
  const width = Math.max(200, Math.round(container.clientWidth));
  const height = Math.max(120, Math.round(container.clientHeight));
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const totals = points.map((p) => series.reduce((sum, s) => sum + valueOf(p, s), 0));
  const { max, step } = niceScale(Math.max(0, ...totals), integers);
  const root = svg('svg', {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    'aria-hidden': 'true',
    focusable: 'false',
  });
  for (let v = 0; v <= max + step / 2; v += step) {
    const y = MARGIN.top + plotH - (plotH * v) / max;
    root.append(svg('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y, y2: y, class: 'grid' }));
    root.append(
      text({ x: MARGIN.left - 6, y: y + 4, 'text-anchor': 'end' }, integers ? fmtNumber(Math.round(v)) : fmtRate(v)),
    );
  }
  const slot = plotW / Math.max(points.length, 1);
  const barW = Math.max(1, slot * 0.8);
  points.forEach((point, i) => {
    let y = MARGIN.top + plotH;
    series.forEach((s, j) => {
      const value = valueOf(point, s);
      if (value <= 0) return;
      const h = (value / max) * plotH;
      y -= h;
      const rect = svg('rect', {
        x: MARGIN.left + i * slot + (slot - barW) / 2,
        y,
        width: barW,
        height: h,
        fill: colours[j] ?? PALETTE[5],
      });
      const title = svg('title');
      title.textContent = `${labelOf(point)} · ${s}: ${fmtRate(value)} ${unit}`;
      rect.append(title);
      root.append(rect);
    });
  });
  for (const i of [0, Math.floor(points.length / 2), points.length - 1]) {
    const point = points[i];
    if (point === undefined) continue;
    const anchor = i === 0 ? 'start' : i === points.length - 1 ? 'end' : 'middle';
    root.append(text({ x: MARGIN.left + i * slot + slot / 2, y: height - 6, 'text-anchor': anchor }, labelOf(point)));
  }
  if (totals.every((t) => t === 0)) {
    root.append(
      text({ x: MARGIN.left + plotW / 2, y: MARGIN.top + plotH / 2, 'text-anchor': 'middle', class: 'empty' }, empty),
    );
  }
  container.replaceChildren(root);
  legend.replaceChildren(
    ...series.map((s, j) => el('li', { class: `swatch-${COLOURS.indexOf(colours[j] ?? '')}`, text: s })),
  );
}

/** An SVG text at these attributes. */
function text(/** @type {Record<string, string | number>} */ attrs, /** @type {string} */ content) {
  const node = svg('text', attrs);
  node.textContent = content;
  return node;
}

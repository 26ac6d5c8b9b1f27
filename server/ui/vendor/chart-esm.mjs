// Chart.js as an ES module for the vendored Chart.js plugins: the UMD
// build (chart.umd.min.js, loaded first by index.html as a classic
// script) defines window.Chart with its classes and helpers; this module
// re-exports the names the plugins import from "chart.js" and
// "chart.js/helpers" (update.sh rewrites those imports to this file).
// Written for Spur, not vendored.

const C = window.Chart;

export const { Chart, DatasetController, Element } = C;
export const { toFont, valueOrDefault, color, getHoverColor } = C.helpers;

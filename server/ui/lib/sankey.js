// Registers the Sankey chart type (chartjs-chart-sankey, vendored as an ES
// module over the UMD Chart.js) with Chart.js: import this module before
// drawing a chart of type "sankey".

import { SankeyController, Flow } from '../vendor/chartjs-chart-sankey.esm.js';

window.Chart.register(SankeyController, Flow);

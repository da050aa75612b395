'use strict';

// The dashboard's plotly.js: the core (scatter is always in it) plus the only other trace types
// static/js draws. The WebGL types come from their `strict` entries, which draw with regl
// commands precompiled by plotly.js instead of generating them with `new Function` at run
// time, so they work under the dashboard's `script-src 'self'` Content-Security-Policy.
var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/bar'),
    require('plotly.js/src/traces/parcoords/strict'),
    // `?chart_mode=gl|merged-gl` (docs/dashboard.md) draws lines as scattergl.
    require('plotly.js/src/traces/scattergl/strict'),
]);

module.exports = Plotly;
